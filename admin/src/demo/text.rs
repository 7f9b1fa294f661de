//! The words of the demo data: review texts in Korean, English and a mix of
//! both, and the names of users, sellers and products.
//!
//! The pools are small and fixed so the output depends only on the random
//! stream; the mix (very short texts, copies of stock phrases, long reviews)
//! is chosen to exercise what the ranker and the readers must handle.

use rand::seq::IndexedRandom;
use rand::Rng;

/// The longest review text generated, in UTF-8 bytes.
pub const MAX_REVIEW_BYTES: usize = 2_000;

/// Which language a review is written in.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Language {
    Korean,
    English,
    Mixed,
}

/// Whether a review praises, shrugs at, or pans the product; follows the rating.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Sentiment {
    Positive = 0,
    Neutral = 1,
    Negative = 2,
}

impl Sentiment {
    fn of_rating(rating: u8) -> Sentiment {
        match rating {
            4.. => Sentiment::Positive,
            3 => Sentiment::Neutral,
            _ => Sentiment::Negative,
        }
    }
}

/// Texts under ten characters, too short to rank and very common in real shops,
/// as (praise, shrug, complaint). Some carry surrounding white space, which
/// readers must trim before counting.
const SHORT_KOREAN: [&[&str]; 3] = [
    &["좋아요", "굿", "최고!", "만족", "ㅎㅎ 좋네요", "5점", "추천", "  좋아요  "],
    &["보통", "그냥 그래요", "무난해요", "쏘쏘"],
    &["별로", "별로예요", "비추", "1점", "실망"],
];
const SHORT_ENGLISH: [&[&str]; 3] = [
    &["Good", "Nice!", "great", "A+", " good ", "Love it"],
    &["ok", "so so", "meh", "fine"],
    &["bad", "Nope.", "meh", "1/5"],
];
const SHORT_MIXED: [&[&str]; 3] =
    [&["굿 good", "Good 굿", "👍 좋아요", "최고 best"], &["ok 괜찮음", "그냥 so so"], &["별로 bad", "비추 👎"]];

/// Stock phrases long enough to rank that many buyers write word for word, or
/// nearly (case, spacing, punctuation): the ranker must not pick two of one.
const STOCK_KOREAN: &[&str] = &[
    "배송 빠르고 좋아요",
    "배송 빠르고  좋아요",
    "재구매 의사 있어요!",
    "가격 대비 최고입니다",
    "만족스러운 구매였습니다",
    "만족스러운 구매였습니다.",
];
const STOCK_ENGLISH: &[&str] = &[
    "Good product",
    "good product",
    "Good  product",
    "GOOD PRODUCT",
    "Good product!",
    "Highly recommended",
    "highly recommended!",
    "Works as described.",
];
const STOCK_MIXED: &[&str] = &["가성비 good 추천합니다", "가성비 Good 추천합니다", "배송 fast, 포장 깔끔"];

const KOREAN_POSITIVE: &[&str] = &[
    "배송이 정말 빨라서 좋았어요.",
    "포장이 꼼꼼하게 되어 있었습니다.",
    "가격 대비 품질이 훌륭해요.",
    "생각했던 것보다 크기가 커서 만족합니다.",
    "색상이 사진이랑 똑같아요.",
    "재구매 의사 있습니다.",
    "부모님 선물로 드렸는데 너무 좋아하세요.",
    "마감이 깔끔하고 튼튼합니다.",
    "한 달 정도 써봤는데 아직까지 문제 없어요.",
    "설명서가 친절해서 설치가 쉬웠어요.",
    "소음이 거의 없어서 밤에도 쓸 수 있어요.",
    "배터리가 오래 가서 출퇴근길에 충전할 필요가 없네요.",
    "디자인이 심플해서 어디에나 잘 어울려요.",
    "판매자분이 문의에 빠르게 답해주셨어요.",
    "친구에게도 추천했어요.",
];
const KOREAN_NEUTRAL: &[&str] = &[
    "무난하게 쓰기 좋아요.",
    "가격만큼 하는 것 같아요.",
    "배송은 보통이었어요.",
    "아직 오래 써보지는 않아서 좀 더 지켜봐야 할 것 같아요.",
    "사이즈가 조금 작게 나온 편이에요.",
    "색상은 사진보다 약간 어두워요.",
    "기대했던 것만큼은 아니지만 나쁘지 않아요.",
];
const KOREAN_NEGATIVE: &[&str] = &[
    "배송이 일주일이나 걸렸어요.",
    "포장 상자가 찌그러져서 왔어요.",
    "한 번 쓰고 고장 났습니다.",
    "사진과 색상이 너무 달라요.",
    "냄새가 심해서 며칠 환기시켰어요.",
    "교환 요청했는데 답변이 없네요.",
    "마감이 엉성하고 실밥이 튀어나와 있어요.",
    "가격에 비해 품질이 아쉬워요.",
];
const ENGLISH_POSITIVE: &[&str] = &[
    "Arrived two days early and well packed.",
    "Great value for the price.",
    "The build quality is much better than I expected.",
    "The colour matches the photos exactly.",
    "I have been using it daily for a month with no issues.",
    "Setup took less than five minutes.",
    "Battery life easily lasts a full day.",
    "Bought a second one for my parents.",
    "Quiet enough to run at night.",
    "Customer service answered my question within an hour.",
];
const ENGLISH_NEUTRAL: &[&str] = &[
    "It does what it says, nothing more.",
    "Sizing runs a little small, so order one size up.",
    "Decent, but the instructions could be clearer.",
    "Shipping took about a week.",
    "Fine for the price.",
];
const ENGLISH_NEGATIVE: &[&str] = &[
    "Stopped working after two weeks.",
    "The box was crushed and one part was missing.",
    "Looks nothing like the pictures.",
    "Strong chemical smell out of the box.",
    "Returned it; the seller took ages to refund.",
    "Cheap plastic, feels like it will break soon.",
];
const MIXED_POSITIVE: &[&str] = &[
    "USB-C 충전이라 편해요.",
    "Bluetooth 연결이 한 번에 잘 돼요.",
    "디자인 is perfect, 색감도 예뻐요.",
    "iPhone 15에 딱 맞아요.",
    "Noise cancelling 성능이 기대 이상이에요.",
    "Galaxy 버즈랑 비교하면 음질은 비슷한데 가격이 착해요.",
];
const MIXED_NEUTRAL: &[&str] = &[
    "사이즈는 M 추천해요, 평소 S 입어요.",
    "Wi-Fi 설정이 조금 헷갈렸지만 manual 보고 해결했어요.",
    "색상은 Navy가 사진보다 밝아요.",
];
const MIXED_NEGATIVE: &[&str] =
    &["App 연동이 자꾸 끊겨요.", "AS 접수했는데 2주째 waiting 중입니다.", "Size가 표기보다 한 치수 작아요."];

/// Descriptive sentences that fit a review of any tone.
const KOREAN_DETAILS: &[&str] = &[
    "저는 주로 출퇴근할 때 사용하고 있어요.",
    "키 170cm, 몸무게 65kg 기준으로 M 사이즈가 잘 맞았어요.",
    "같은 브랜드의 이전 모델도 써봤는데 비교해서 말씀드릴게요.",
    "아이가 있는 집이라 안전성을 꼼꼼히 봤어요.",
    "주말마다 캠핑 갈 때 챙겨 가요.",
    "구성품은 본체, 케이블, 설명서였어요.",
    "사무실 책상 위에 두고 매일 쓰고 있습니다.",
    "세척은 분리해서 물로 헹구면 돼서 간편해요.",
    "무게는 생각보다 가벼워서 들고 다니기 좋아요.",
    "할인할 때 사서 더 만족스러워요.",
    "주문하고 이틀 만에 받았어요.",
    "전원을 켜면 파란 불이 들어오고 바로 작동해요.",
];
const ENGLISH_DETAILS: &[&str] = &[
    "I mostly use it on my commute.",
    "For reference, I am 175 cm and the medium fits well.",
    "I owned the previous model, so I can compare the two.",
    "We have a toddler at home, so safety mattered a lot.",
    "I take it camping most weekends.",
    "In the box: the unit, a cable and a short manual.",
    "It sits on my office desk and gets used every day.",
    "Cleaning is easy: it comes apart and rinses under the tap.",
    "Lighter than it looks, easy to carry around.",
    "I bought it on sale, which makes it even better value.",
    "Ordered on Monday, it arrived on Wednesday.",
];

/// Openings and closings that frame the long, detailed reviews.
const KOREAN_OPENINGS: &[&str] = &[
    "[구매 이유] 쓰던 제품이 고장 나서 여러 제품을 비교해 보고 구매했습니다.",
    "[사용 기간] 3주 정도 매일 사용해 보고 후기 남깁니다.",
    "[총평] 결론부터 말씀드리면 가격을 생각하면 충분히 괜찮은 선택입니다.",
];
const KOREAN_CLOSINGS: &[&str] = &[
    "구매 고민하시는 분들께 도움이 되었으면 좋겠어요.",
    "추가로 써보고 후기 업데이트할게요.",
    "이상 솔직한 후기였습니다.",
];
const ENGLISH_OPENINGS: &[&str] = &[
    "I compared five similar products before buying this one, so here is a detailed review.",
    "After three weeks of daily use, these are my impressions.",
    "Short version: worth it at this price, with a few caveats.",
];
const ENGLISH_CLOSINGS: &[&str] = &[
    "Hope this helps anyone on the fence.",
    "I will update this review after a few months.",
    "That is my honest take.",
];

const SURNAMES: &[&str] =
    &["김", "이", "박", "최", "정", "강", "조", "윤", "장", "임", "한", "오", "서", "신", "권", "황"];
const GIVEN_SYLLABLES: &[&str] = &[
    "민", "서", "준", "지", "현", "우", "수", "영", "하", "은", "도", "윤", "예", "진", "성", "호", "유", "아", "연",
    "태",
];
const NICKNAME_ADJECTIVES: &[&str] =
    &["happy", "lazy", "quick", "sunny", "blue", "tiny", "brave", "행복한", "졸린", "배고픈"];
const NICKNAME_NOUNS: &[&str] = &["cat", "panda", "shopper", "otter", "fox", "고양이", "다람쥐", "곰돌이", "토끼"];
const SELLER_WORDS: &[&str] =
    &["한빛", "푸른", "Blue Ocean", "Daily", "Seoul", "Maple", "Green", "Sunny", "새봄", "하늘"];
const SELLER_KINDS: &[&str] = &["상점", "마켓", "Store", "Shop", "Mall", "리빙", "Outlet"];
const PRODUCT_KINDS: &[&str] = &[
    "무선 이어폰",
    "Wireless Earbuds",
    "스테인리스 텀블러",
    "Running Shoes",
    "초음파 가습기",
    "LED Desk Lamp",
    "USB-C 고속 충전기",
    "Cotton T-shirt",
    "전기 포트",
    "Travel Backpack",
    "블루투스 스피커",
    "Mechanical Keyboard",
];
const PRODUCT_FEATURES: &[&str] = &[
    "<li>1년 무상 A/S</li>",
    "<li>Free shipping over 30,000 KRW</li>",
    "<li>KC 인증 완료</li>",
    "<li>Available in 4 colours</li>",
    "<li>국내 배송 1~2일 소요</li>",
    "<li>BPA free</li>",
];

/// Picks one item of a fixed, non-empty pool.
fn pick<'a, R: Rng>(rng: &mut R, pool: &[&'a str]) -> &'a str {
    // Every pool above is a non-empty constant, so `choose` always finds an item.
    pool.choose(rng).copied().unwrap_or_default()
}

fn sentences(language: Language, sentiment: Sentiment) -> &'static [&'static str] {
    match (language, sentiment) {
        (Language::Korean, Sentiment::Positive) => KOREAN_POSITIVE,
        (Language::Korean, Sentiment::Neutral) => KOREAN_NEUTRAL,
        (Language::Korean, Sentiment::Negative) => KOREAN_NEGATIVE,
        (Language::English, Sentiment::Positive) => ENGLISH_POSITIVE,
        (Language::English, Sentiment::Neutral) => ENGLISH_NEUTRAL,
        (Language::English, Sentiment::Negative) => ENGLISH_NEGATIVE,
        (Language::Mixed, Sentiment::Positive) => MIXED_POSITIVE,
        (Language::Mixed, Sentiment::Neutral) => MIXED_NEUTRAL,
        (Language::Mixed, Sentiment::Negative) => MIXED_NEGATIVE,
    }
}

/// Every sentence a review in `language` with `sentiment` may use: the tone's
/// own sentences plus descriptive ones; mixed reviews also borrow whole Korean
/// and English sentences.
fn sentence_pool(language: Language, sentiment: Sentiment) -> Vec<&'static str> {
    let languages: &[Language] = match language {
        Language::Mixed => &[Language::Mixed, Language::Korean, Language::English],
        Language::Korean => &[Language::Korean],
        Language::English => &[Language::English],
    };
    let mut pool = Vec::new();
    for language in languages {
        pool.extend_from_slice(sentences(*language, sentiment));
        match language {
            Language::Korean => pool.extend_from_slice(KOREAN_DETAILS),
            Language::English => pool.extend_from_slice(ENGLISH_DETAILS),
            Language::Mixed => {}
        }
    }
    pool
}

/// Appends distinct sentences, in random order, separated by a space or now
/// and then a line break, until the next one would pass `target_bytes`: always
/// at least `min_sentences` (as many as the pool holds), never past
/// [`MAX_REVIEW_BYTES`].
fn compose<R: Rng>(
    rng: &mut R,
    language: Language,
    sentiment: Sentiment,
    min_sentences: usize,
    target_bytes: usize,
) -> String {
    let mut pool = sentence_pool(language, sentiment);
    let mut text = String::new();
    let mut count = 0;
    while !pool.is_empty() {
        let next = pool.swap_remove(rng.random_range(0..pool.len()));
        let separator = if text.is_empty() {
            ""
        } else if rng.random_bool(0.15) {
            "\n"
        } else {
            " "
        };
        let grown = text.len() + separator.len() + next.len();
        if count >= min_sentences && grown > target_bytes || grown > MAX_REVIEW_BYTES {
            break;
        }
        text.push_str(separator);
        text.push_str(next);
        count += 1;
    }
    text
}

/// A long review: an opening, a body of mostly on-sentiment sentences, a closing.
fn detailed_review<R: Rng>(rng: &mut R, language: Language, sentiment: Sentiment) -> String {
    let (openings, closings) = match language {
        Language::English => (ENGLISH_OPENINGS, ENGLISH_CLOSINGS),
        Language::Korean | Language::Mixed => (KOREAN_OPENINGS, KOREAN_CLOSINGS),
    };
    let opening = pick(rng, openings);
    let closing = pick(rng, closings);
    let target = rng.random_range(600..=MAX_REVIEW_BYTES);
    let budget = target.saturating_sub(opening.len() + closing.len() + 2);
    let body = compose(rng, language, sentiment, 3, budget);
    let mut text = format!("{opening}\n{body}");
    if text.len() + 1 + closing.len() <= MAX_REVIEW_BYTES {
        text.push('\n');
        text.push_str(closing);
    }
    text
}

/// A review text for a comment rated `rating` (1..=5).
///
/// The mix, by share of comments: 12 % under ten characters, 10 % stock
/// phrases that repeat across buyers, 50 % one to three sentences, 20 % four
/// to eight, and 8 % long reviews of 600 to 2,000 bytes. By language: 60 %
/// Korean, 25 % English, 15 % mixed Hangul and Latin.
pub fn review<R: Rng>(rng: &mut R, rating: u8) -> String {
    let language = match rng.random_range(0..100) {
        0..60 => Language::Korean,
        60..85 => Language::English,
        _ => Language::Mixed,
    };
    let sentiment = Sentiment::of_rating(rating);
    match rng.random_range(0..100) {
        0..12 => {
            let pools = match language {
                Language::Korean => SHORT_KOREAN,
                Language::English => SHORT_ENGLISH,
                Language::Mixed => SHORT_MIXED,
            };
            pick(rng, pools[sentiment as usize]).to_owned()
        }
        12..22 => {
            let pool = match language {
                Language::Korean => STOCK_KOREAN,
                Language::English => STOCK_ENGLISH,
                Language::Mixed => STOCK_MIXED,
            };
            pick(rng, pool).to_owned()
        }
        22..72 => {
            let sentences = rng.random_range(1..=3);
            compose(rng, language, sentiment, sentences, 0)
        }
        72..92 => {
            let sentences = rng.random_range(4..=8);
            compose(rng, language, sentiment, sentences, 0)
        }
        _ => detailed_review(rng, language, sentiment),
    }
}

/// A Korean full name: a surname and two given-name syllables.
pub fn person_name<R: Rng>(rng: &mut R) -> String {
    format!("{}{}{}", pick(rng, SURNAMES), pick(rng, GIVEN_SYLLABLES), pick(rng, GIVEN_SYLLABLES))
}

/// A nickname such as `sunny_otter42` or `졸린고양이7`.
pub fn nickname<R: Rng>(rng: &mut R) -> String {
    let adjective = pick(rng, NICKNAME_ADJECTIVES);
    let noun = pick(rng, NICKNAME_NOUNS);
    let number = rng.random_range(1..1000);
    if adjective.is_ascii() && noun.is_ascii() {
        format!("{adjective}_{noun}{number}")
    } else {
        format!("{adjective}{noun}{number}")
    }
}

/// A shop name such as `Blue Ocean Store` or `한빛마켓`.
pub fn seller_name<R: Rng>(rng: &mut R) -> String {
    let word = pick(rng, SELLER_WORDS);
    let kind = pick(rng, SELLER_KINDS);
    if word.is_ascii() && kind.is_ascii() {
        format!("{word} {kind}")
    } else {
        format!("{word}{kind}")
    }
}

/// A product page's rich content: a small HTML document naming the product.
pub fn product_page<R: Rng>(rng: &mut R, product_id: &str) -> Vec<u8> {
    let kind = pick(rng, PRODUCT_KINDS);
    let model = rng.random_range(100..1000);
    let description_bytes = rng.random_range(50..400);
    let description = compose(rng, Language::Mixed, Sentiment::Positive, 1, description_bytes);
    let mut page = format!("<article data-product=\"{product_id}\"><h1>{kind} X-{model}</h1><p>{description}</p><ul>");
    for _ in 0..rng.random_range(1..=4) {
        page.push_str(pick(rng, PRODUCT_FEATURES));
    }
    page.push_str("</ul></article>");
    page.into_bytes()
}
