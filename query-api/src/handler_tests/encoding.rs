//! Compression: answers gzipped per request, and a prepared answer's variant chosen by `Accept-Encoding` and revalidated as that variant.

use super::*;

#[tokio::test]
async fn responses_are_gzipped_when_asked() {
    let app = offline_app(Duration::from_secs(5));
    let request =
        Request::get("/openapi.json").header(header::ACCEPT_ENCODING, "gzip").body(Body::empty()).expect("request");
    let answer = send(&app, request).await;
    assert_eq!(answer.status, StatusCode::OK);
    assert_eq!(answer.headers[header::CONTENT_ENCODING], "gzip");
}

#[tokio::test]
async fn a_prepared_answer_is_sent_in_the_variant_asked_for_and_revalidated_as_that_variant() {
    let app = offline_app(Duration::from_secs(5));
    let script = |accept: Option<&str>, if_none_match: Option<&str>| {
        let mut request = Request::get(crate::routes::widget::SCRIPT_PATH);
        if let Some(accept) = accept {
            request = request.header(header::ACCEPT_ENCODING, accept);
        }
        if let Some(tag) = if_none_match {
            request = request.header(header::IF_NONE_MATCH, tag);
        }
        send(&app, request.body(Body::empty()).expect("request"))
    };
    let identity = script(None, None).await;
    assert_eq!(identity.status, StatusCode::OK);
    assert!(identity.headers.get(header::CONTENT_ENCODING).is_none());
    assert_eq!(identity.headers[header::VARY], "accept-encoding");
    assert_eq!(identity.headers.get_all(header::VARY).iter().count(), 1, "said once, not again by the compression");
    let browser = script(Some("gzip, deflate, br, zstd"), None).await;
    assert_eq!(browser.headers[header::CONTENT_ENCODING], "br", "a browser gets brotli");
    let mut decoded = Vec::new();
    std::io::Read::read_to_end(&mut brotli::Decompressor::new(&browser.body[..], 4096), &mut decoded).expect("br");
    assert_eq!(decoded, identity.body, "the variant decodes to the identity");
    assert!(browser.body.len() * 3 < identity.body.len(), "{} of {} bytes", browser.body.len(), identity.body.len());
    let gzip = script(Some("gzip"), None).await;
    assert_eq!(gzip.headers[header::CONTENT_ENCODING], "gzip");
    let tags =
        [&identity, &browser, &gzip].map(|answer| answer.headers[header::ETAG].to_str().expect("tag").to_owned());
    assert!(tags[0] != tags[1] && tags[1] != tags[2] && tags[0] != tags[2], "a tag per variant: {tags:?}");
    // A browser holding the brotli variant revalidates it: 304, naming it.
    let revalidated = script(Some("gzip, deflate, br, zstd"), Some(&tags[1])).await;
    assert_eq!(revalidated.status, StatusCode::NOT_MODIFIED);
    assert_eq!(revalidated.headers[header::ETAG], tags[1].as_str());
    assert_eq!(revalidated.headers[header::VARY], "accept-encoding");
    // The gzip variant's tag does not stand for the brotli one.
    assert_eq!(script(Some("br"), Some(&tags[2])).await.status, StatusCode::OK);
}
