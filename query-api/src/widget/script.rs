//! The script `/widget/v1/reviews.js` as served: its source, messages and
//! style from the repository's `widget/` folder, put together once at start.

use std::sync::{Arc, LazyLock};

use axum::body::Bytes;
use axum::http::HeaderValue;

use super::messages::MESSAGES_JSON;
use crate::encoding::{Effort, Prepared};

/// The script's source, with placeholders for the messages and the style.
const SCRIPT_SOURCE: &str = include_str!("../../../widget/reviews.js");
/// The widgets' style sheet, inside each shadow root.
pub(super) const STYLE: &str = include_str!("../../../widget/reviews.css");

/// The script as served: the source with its messages and style filled in.
/// Compressed as small as each coding makes it, once for the life of the process.
pub static SCRIPT: LazyLock<Arc<Prepared>> = LazyLock::new(|| {
    let style = serde_json::to_string(STYLE).unwrap_or_else(|_| "''".to_owned());
    let script = SCRIPT_SOURCE.replacen("/*MESSAGES*/ {}", MESSAGES_JSON.trim(), 1).replacen("/*STYLE*/ ''", &style, 1);
    Arc::new(Prepared::compressed(Bytes::from(script), Effort::Smallest))
});

/// The `Cache-Control` of the script: a day; a new release changes its `ETag`,
/// and a page that revalidates after a day gets it.
pub const SCRIPT_CACHE_CONTROL: HeaderValue = HeaderValue::from_static("public, max-age=86400");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_script_is_served_with_its_messages_and_style() {
        let script = String::from_utf8(SCRIPT.body().to_vec()).expect("utf-8");
        assert!(SCRIPT.weight_bytes() > SCRIPT.body().len(), "served compressed from bytes made at start");
        assert!(!script.contains("/*MESSAGES*/") && !script.contains("/*STYLE*/"));
        assert!(script.contains("\"heading\": \"Reviews\"") && script.contains(".histogram"), "filled in");
    }
}
