//! What the widgets say, in the languages they speak: the messages of
//! `widget/messages.json`, and numbers and dates written as the browser's
//! `Intl` writes them, so the server's first view reads as the script's.

use std::collections::HashMap;
use std::sync::LazyLock;

use chrono::DateTime;
use serde::Deserialize;

/// Every message the widgets show, by language.
pub(super) const MESSAGES_JSON: &str = include_str!("../../../widget/messages.json");

/// A language the widgets speak. Any other tag is shown in English, by the
/// script and here alike.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Lang {
    /// English.
    En,
    /// Korean.
    Ko,
}

impl Lang {
    /// The language a `lang` tag asks for: Korean for `ko` and its regions, English otherwise.
    pub fn from_tag(tag: Option<&str>) -> Lang {
        match tag {
            Some(tag) if tag.to_ascii_lowercase().starts_with("ko") => Lang::Ko,
            _ => Lang::En,
        }
    }

    /// The language's tag.
    pub fn tag(self) -> &'static str {
        match self {
            Lang::En => "en",
            Lang::Ko => "ko",
        }
    }

    /// Whether `count` takes the singular (`Intl.PluralRules`' `one`).
    pub(super) fn is_one(self, count: u64) -> bool {
        self == Lang::En && count == 1
    }

    /// `n` with its thousands grouped, as `Intl.NumberFormat` writes it in both languages.
    pub(super) fn number(self, n: u64) -> String {
        let digits = n.to_string();
        let mut grouped = String::with_capacity(digits.len() + digits.len() / 3);
        for (index, digit) in digits.chars().enumerate() {
            if index > 0 && (digits.len() - index) % 3 == 0 {
                grouped.push(',');
            }
            grouped.push(digit);
        }
        grouped
    }

    /// A date as `Intl.DateTimeFormat`'s `dateStyle: "medium"` writes it, in
    /// UTC; none outside 1970 to 9999, as the script.
    pub(super) fn date(self, epoch_ms: i64) -> String {
        let Some(moment) = dated(epoch_ms) else {
            return String::new();
        };
        match self {
            Lang::En => moment.format("%b %-d, %Y").to_string(),
            Lang::Ko => moment.format("%Y. %-m. %-d.").to_string(),
        }
    }
}

/// One message: the same text for every count, or a singular and a plural.
#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Message {
    Plain(String),
    Plural { one: Option<String>, other: String },
}

static MESSAGES: LazyLock<HashMap<String, HashMap<String, Message>>> =
    LazyLock::new(|| serde_json::from_str(MESSAGES_JSON).unwrap_or_default());

/// The message `key` in `lang` for `count`, with `{name}` placeholders filled
/// from `values`; the key itself when the message is missing (a unit test
/// renders every one).
pub(super) fn say(lang: Lang, key: &str, count: u64, values: &[(char, &str)]) -> String {
    let message = MESSAGES.get(lang.tag()).and_then(|messages| messages.get(key));
    let template = match message {
        Some(Message::Plain(text)) => text.as_str(),
        Some(Message::Plural { one: Some(one), .. }) if lang.is_one(count) => one.as_str(),
        Some(Message::Plural { other, .. }) => other.as_str(),
        None => key,
    };
    let mut said = template.to_owned();
    for (name, value) in values {
        said = said.replace(&format!("{{{name}}}"), value);
    }
    said
}

/// The last millisecond of the year 9999: later timestamps (seconds taken
/// for microseconds, say) show no date, here and in the script.
pub(super) const LAST_MS: i64 = 253_402_300_799_999;

fn dated(epoch_ms: i64) -> Option<DateTime<chrono::Utc>> {
    (0..=LAST_MS).contains(&epoch_ms).then(|| DateTime::from_timestamp_millis(epoch_ms)).flatten()
}

pub(super) fn iso_date(epoch_ms: i64) -> String {
    dated(epoch_ms).map(|moment| moment.format("%Y-%m-%d").to_string()).unwrap_or_default()
}

/// An average rounded to one decimal, as the script rounds it (`Math.round(x * 10) / 10`).
pub(super) fn rounded(average: f64) -> f64 {
    (average * 10.0).round() / 10.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_dates_and_plurals_follow_intl_in_both_languages() {
        assert_eq!(Lang::En.number(1_234_567), "1,234,567");
        assert_eq!(Lang::Ko.number(999), "999");
        assert_eq!(Lang::En.date(1_700_000_000_000), "Nov 14, 2023");
        assert_eq!(Lang::Ko.date(1_700_000_000_000), "2023. 11. 14.");
        assert_eq!(say(Lang::En, "reviews", 1, &[('n', "1")]), "1 review");
        assert_eq!(say(Lang::En, "reviews", 2, &[('n', "2")]), "2 reviews");
        assert_eq!(say(Lang::Ko, "reviews", 1, &[('n', "1")]), "리뷰 1개");
        assert_eq!(Lang::from_tag(Some("ko-KR")), Lang::Ko);
        assert_eq!(Lang::from_tag(Some("de")), Lang::En);
        assert_eq!(rounded(4.25), 4.3, "half up, as Math.round");
        assert_eq!(Lang::En.date(LAST_MS), "Dec 31, 9999");
        for outside in [LAST_MS + 1, -1, i64::MAX] {
            assert_eq!((Lang::En.date(outside), iso_date(outside)), (String::new(), String::new()), "{outside}");
        }
    }

    #[test]
    fn every_message_is_there_in_every_language() {
        let english = &MESSAGES["en"];
        for (lang, messages) in MESSAGES.iter() {
            let mut missing: Vec<&String> = english.keys().filter(|key| !messages.contains_key(*key)).collect();
            missing.sort();
            assert!(missing.is_empty(), "{lang} lacks {missing:?}");
        }
        assert_eq!(MESSAGES.len(), 2);
    }
}
