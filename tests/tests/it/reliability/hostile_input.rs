//! Hostile input, table-driven, over HTTP against the real service: every
//! route of docs/contract.md §7 with bad ids, bad limits and bad cursors, and the
//! seed's POST routes with bad and oversized bodies. Each case must answer a
//! 4xx in the `{"error": {"code", "message"}}` shape, never a 5xx, and a
//! real page must still read fine afterwards.

use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use base64::Engine;
use common::keys;
use integration_tests::fresh_store;
use reqwest::StatusCode;
use serde_json::{json, Value};

use integration_tests::app::{Answer, TestApp};
use integration_tests::fixtures::{post_all, Catalogue};

use crate::rows::drop_tables;

/// The GET routes that take an id, as templates over `{id}`.
const PRODUCT_ROUTES: [&str; 4] = [
    "/v1/products/{id}/comments",
    "/v1/products/{id}/comments/ranked",
    "/product/{id}/comments/latest",
    "/product/{id}/comments/ranked",
];
const USER_ROUTES: [&str; 2] = ["/v1/users/{id}/comments", "/user/{id}/comments/latest"];
const SEED_NEXT_ROUTES: [&str; 2] = ["/product/comments/get", "/user/comments/get"];

/// `cursor` cut short to the nearest length that no base64 text can have
/// (one more than a multiple of four). A cursor cut to any other length may
/// still name a valid position inside its own list, which is not an error.
fn truncated(cursor: &str) -> String {
    let mut length = cursor.len() - 1;
    while length % 4 != 1 {
        length -= 1;
    }
    cursor[..length].to_owned()
}

/// Checks one answer: the expected 4xx (or any 4xx when `code` is `None`) in the error shape.
fn check(case: &str, answer: &Answer, status: Option<StatusCode>, code: Option<&str>, failures: &mut Vec<String>) {
    let shaped = answer.has_error_shape();
    let status_ok = match status {
        Some(expected) => answer.status == expected,
        None => answer.status.is_client_error(),
    };
    let code_ok = code.is_none_or(|code| answer.body["error"]["code"] == code);
    if !(answer.status.is_client_error() && shaped && status_ok && code_ok) {
        failures.push(format!("{case}: {} {}", answer.status, answer.raw.chars().take(300).collect::<String>()));
    }
}

#[tokio::test]
async fn bad_ids_limits_and_cursors_on_every_route_answer_4xx_in_the_error_shape() {
    let store = fresh_store("rel_hostile_query").await;
    let catalogue = Catalogue { products: 3, comments_per_product: 25, users: 3 };
    post_all(&store, catalogue.new_comments(0)).await;
    let service = TestApp::spawn(store.clone(), Default::default()).await;
    let product = catalogue.product(0);
    let user = catalogue.user(0);
    let mut failures = Vec::new();
    let mut cases = 0;

    let long_id = "A".repeat(11);
    let huge_id = "B".repeat(10_000);
    let bad_ids = [
        "P1",                             // short
        long_id.as_str(),                 // one too long
        huge_id.as_str(),                 // very long
        "%ED%95%9C%EA%B8%80P0000001",     // non-ASCII (UTF-8, percent-encoded)
        "%C3%A9%C3%A9%C3%A9%C3%A9%C3%A9", // ten non-ASCII characters
        "%FF%FE000000000",                // not UTF-8 at all
        "P0000%2F001",                    // percent-encoded slash, ten characters once decoded
        "%2F%2F%2F%2F%2F%2F%2F%2F%2F%2F",
        "P00000000%00", // NUL
        "P000%0900001", // a tab: ten bytes, not printable
        "P0000%7F0001", // DEL: ten bytes, not printable
    ];
    for template in PRODUCT_ROUTES.iter().chain(USER_ROUTES.iter()) {
        for id in bad_ids {
            let path = template.replace("{id}", id);
            cases += 1;
            check(&path, &service.get(&path).await, Some(StatusCode::BAD_REQUEST), Some("invalid_id"), &mut failures);
        }
        // Dot segments must reach the service as sent: no URL library sends them unchanged.
        for id in ["..", "%2e%2e", ".", "...."] {
            let path = template.replace("{id}", id);
            cases += 1;
            check(&format!("raw {path}"), &service.raw_get(&path).await, None, None, &mut failures);
        }
    }

    let bad_limits = ["0", "-1", "101", "1e9", "abc", "", "1.5", "%20", "99999999999999999999999", "0x10", "１０"];
    let limited: Vec<String> = PRODUCT_ROUTES
        .iter()
        .map(|template| template.replace("{id}", &product.to_string()))
        .chain(USER_ROUTES.iter().map(|template| template.replace("{id}", &user.to_string())))
        .collect();
    for path in &limited {
        for limit in bad_limits {
            let path = format!("{path}?limit={limit}");
            cases += 1;
            check(
                &path,
                &service.get(&path).await,
                Some(StatusCode::BAD_REQUEST),
                Some("invalid_limit"),
                &mut failures,
            );
        }
        let repeated = format!("{path}?limit=5&limit=6");
        cases += 1;
        check(&repeated, &service.get(&repeated).await, Some(StatusCode::BAD_REQUEST), None, &mut failures);
    }

    // Cursors: real ones of another product and of a user, garbage, forged
    // keys outside the prefix, truncated ones that no longer decode, huge ones.
    let first_page = |path: String| {
        let service = &service;
        async move {
            let answer = service.get(&path).await;
            assert_eq!(answer.status, StatusCode::OK, "{}", answer.raw);
            answer.body["nextCursor"].as_str().expect("a next cursor").to_owned()
        }
    };
    let product_cursor = first_page(format!("/v1/products/{product}/comments?limit=3")).await;
    let other_product_cursor = first_page(format!("/v1/products/{}/comments?limit=3", catalogue.product(1))).await;
    let user_cursor = first_page(format!("/v1/users/{user}/comments?limit=3")).await;
    let other_user_cursor = first_page(format!("/v1/users/{}/comments?limit=3", catalogue.user(1))).await;
    let rank_key_cursor = URL_SAFE_NO_PAD.encode(keys::rank_key(&product, 1));
    let prefix_only = URL_SAFE_NO_PAD.encode(keys::product_comment_prefix(&product));
    let huge = "A".repeat(20_000);
    let bad_cursors_for = |own: &str, other: &str, wrong_kind: &str| -> Vec<(String, &'static str)> {
        vec![
            ("!!!".to_owned(), "garbage"),
            ("%25%25%25".to_owned(), "percent signs"),
            ("not a cursor".to_owned(), "spaces"),
            ("AAAA".to_owned(), "decodes outside the prefix"),
            (other.to_owned(), "another list's cursor"),
            (wrong_kind.to_owned(), "the other index's cursor"),
            (rank_key_cursor.clone(), "a rank key"),
            (prefix_only.clone(), "the bare prefix"),
            (truncated(own), "truncated to a length base64 cannot have"),
            (own[..13].to_owned(), "truncated inside the id"),
            (format!("{own}="), "padded"),
            (format!("{own}{own}{own}"), "three cursors glued"),
            (huge.clone(), "huge"),
        ]
    };
    for (path, own, other, wrong_kind) in [
        (format!("/v1/products/{product}/comments"), &product_cursor, &other_product_cursor, &user_cursor),
        (format!("/v1/users/{user}/comments"), &user_cursor, &other_user_cursor, &product_cursor),
    ] {
        for (cursor, what) in bad_cursors_for(own, other, wrong_kind) {
            cases += 1;
            let answer = service.get(&format!("{path}?cursor={cursor}")).await;
            check(
                &format!("{path} cursor {what}"),
                &answer,
                Some(StatusCode::BAD_REQUEST),
                Some("invalid_cursor"),
                &mut failures,
            );
        }
        cases += 1;
        check(
            &format!("{path} empty cursor"),
            &service.get(&format!("{path}?cursor=")).await,
            Some(StatusCode::BAD_REQUEST),
            None,
            &mut failures,
        );
    }

    // After all that, real pages still read, and nothing answered 5xx.
    let page = service.get(&format!("/v1/products/{product}/comments?limit=3&cursor={product_cursor}")).await;
    assert_eq!(page.status, StatusCode::OK, "{}", page.raw);
    assert_eq!(page.comments().len(), 3);
    println!("hostile queries: {cases} cases, {} failed", failures.len());
    assert!(
        failures.is_empty(),
        "{} of {cases} hostile requests were not a shaped 4xx:\n{}",
        failures.len(),
        failures.join("\n")
    );
    service.shut_down().await;
    drop_tables(&[&store]).await;
}

#[tokio::test]
async fn bad_and_oversized_bodies_on_the_seed_routes_answer_4xx_in_the_error_shape() {
    let store = fresh_store("rel_hostile_bodies").await;
    let catalogue = Catalogue { products: 2, comments_per_product: 5, users: 2 };
    post_all(&store, catalogue.new_comments(0)).await;
    let service = TestApp::spawn(store.clone(), Default::default()).await;
    let product_key = STANDARD.encode(keys::product_comment_prefix(&catalogue.product(0)));
    let user_key = STANDARD.encode(keys::user_comment_prefix(&catalogue.user(0)));
    let mut failures = Vec::new();
    let mut cases = 0;

    let json_cases: Vec<(Value, Option<&str>)> = vec![
        (json!(null), Some("invalid_body")),
        (json!([]), Some("invalid_body")),
        (json!(42), Some("invalid_body")),
        (json!("startIndexKey"), Some("invalid_body")),
        (json!({}), Some("invalid_body")),
        (json!({"limit": 5}), Some("invalid_body")),
        (json!({"startIndexKey": null}), Some("invalid_body")),
        (json!({"startIndexKey": 42}), Some("invalid_body")),
        (json!({"startIndexKey": true}), Some("invalid_body")),
        (json!({"startIndexKey": {"a": 1}}), Some("invalid_body")),
        (json!({"startIndexKey": [1, 2, 3]}), Some("invalid_body")),
        (json!({"startIndexKey": ""}), Some("invalid_cursor")),
        (json!({"startIndexKey": "@@@@"}), Some("invalid_cursor")),
        (json!({"startIndexKey": "a"}), Some("invalid_cursor")),
        (json!({"startIndexKey": "===="}), Some("invalid_cursor")),
        (json!({"startIndexKey": "UFJPRFVD VDAwMWM="}), Some("invalid_cursor")),
        (json!({"startIndexKey": STANDARD.encode([0u8; 5])}), Some("invalid_cursor")),
        (json!({"startIndexKey": STANDARD.encode([b'P'; 200])}), Some("invalid_cursor")),
        (json!({"startIndexKey": STANDARD.encode("é".repeat(12))}), Some("invalid_cursor")),
        (json!({"startIndexKey": "A".repeat(10_000)}), None),
    ];
    let limit_cases = [json!(0), json!(-1), json!(101), json!(1e9), json!("20"), json!(1.5), json!(true), json!([20])];
    for route in SEED_NEXT_ROUTES {
        let key = if route.starts_with("/product") { &product_key } else { &user_key };
        for (body, code) in &json_cases {
            cases += 1;
            let answer = service.post_json(route, body).await;
            check(
                &format!("{route} {}", body.to_string().chars().take(60).collect::<String>()),
                &answer,
                None,
                *code,
                &mut failures,
            );
        }
        for limit in &limit_cases {
            cases += 1;
            let answer = service.post_json(route, &json!({"startIndexKey": key, "limit": limit})).await;
            check(
                &format!("{route} limit {limit}"),
                &answer,
                Some(StatusCode::BAD_REQUEST),
                Some("invalid_limit"),
                &mut failures,
            );
        }
        let raw_cases: Vec<(&str, Option<&str>, Vec<u8>)> = vec![
            ("not JSON", Some("application/json"), b"hello".to_vec()),
            ("empty body", Some("application/json"), Vec::new()),
            ("truncated JSON", Some("application/json"), b"{\"startIndexKey\":".to_vec()),
            ("not UTF-8", Some("application/json"), vec![b'{', b'"', 0xff, 0xfe, b'"', b':', b'1', b'}']),
            ("nested 10,000 deep", Some("application/json"), ("[".repeat(10_000) + &"]".repeat(10_000)).into_bytes()),
            ("no content type", None, format!("{{\"startIndexKey\":\"{key}\"}}").into_bytes()),
            ("text/plain", Some("text/plain"), format!("{{\"startIndexKey\":\"{key}\"}}").into_bytes()),
            (
                "17 KiB",
                Some("application/json"),
                format!("{{\"startIndexKey\":\"{key}\",\"pad\":\"{}\"}}", "x".repeat(17 * 1024)).into_bytes(),
            ),
            ("1 MiB", Some("application/json"), vec![b' '; 1024 * 1024]),
        ];
        for (what, content_type, body) in raw_cases {
            cases += 1;
            check(
                &format!("{route} {what}"),
                &service.post_bytes(route, content_type, body).await,
                None,
                None,
                &mut failures,
            );
        }
    }
    // The other index's key, a key shorter than an id, and one inside the
    // right prefix but longer than any stored key could sensibly be. (A key
    // of unexpected length that is not huge is a valid place to resume: the
    // service hands out the keys of corrupt rows as `nextIndexKey` too.)
    let mut long_product_key = keys::product_comment_prefix(&catalogue.product(0));
    long_product_key.extend_from_slice(&[0x7f; 100]);
    for (route, key) in [
        ("/product/comments/get", STANDARD.encode(keys::rank_key(&catalogue.product(0), 1))),
        ("/product/comments/get", STANDARD.encode(&long_product_key)),
        ("/user/comments/get", STANDARD.encode([b'U'; 9])),
    ] {
        cases += 1;
        let answer = service.post_json(route, &json!({"startIndexKey": key})).await;
        check(
            &format!("{route} key {key}"),
            &answer,
            Some(StatusCode::BAD_REQUEST),
            Some("invalid_cursor"),
            &mut failures,
        );
    }

    let good = service.post_json("/product/comments/get", &json!({"startIndexKey": product_key, "limit": 2})).await;
    assert_eq!(good.status, StatusCode::OK, "{}", good.raw);
    assert_eq!(good.comments().len(), 2);
    println!("hostile bodies: {cases} cases, {} failed", failures.len());
    assert!(
        failures.is_empty(),
        "{} of {cases} hostile bodies were not a shaped 4xx:\n{}",
        failures.len(),
        failures.join("\n")
    );
    service.shut_down().await;
    drop_tables(&[&store]).await;
}
