//! The OpenAPI document and its docs page: every route, constraint and status listed, nothing loaded from the internet.

use super::*;

#[tokio::test]
async fn the_openapi_document_lists_every_route() {
    let app = offline_app(Duration::from_secs(5));
    let document = get(&app, "/openapi.json").await.json();
    let paths = document["paths"].as_object().expect("paths");
    for (path, method) in [
        ("/v1/products/{productId}/comments", "get"),
        ("/v1/users/{userId}/comments", "get"),
        ("/v1/products/{productId}/comments/ranked", "get"),
        ("/v1/products/{productId}/comments/summary", "get"),
        ("/v1/summaries", "get"),
        ("/v1/reviews/{reviewId}", "get"),
        ("/product/{productId}/comments/latest", "get"),
        ("/product/comments/get", "post"),
        ("/user/{userId}/comments/latest", "get"),
        ("/user/comments/get", "post"),
        ("/product/{productId}/comments/ranked", "get"),
        ("/healthz", "get"),
        ("/readyz", "get"),
        ("/metrics", "get"),
    ] {
        assert!(paths.get(path).and_then(|item| item.get(method)).is_some(), "{method} {path} is not documented");
    }
    for schema in [
        "Comment",
        "SeedComment",
        "RankedComment",
        "CommentsPage",
        "SeedCommentsPage",
        "ErrorBody",
        "ReviewSummaryView",
        "SummariesPage",
        "CommentView",
        "Author",
    ] {
        assert!(document["components"]["schemas"].get(schema).is_some(), "schema {schema} is missing");
    }
}

/// Every operation of the document, as (path, method, operation).
fn operations(document: &serde_json::Value) -> Vec<(String, String, serde_json::Value)> {
    let paths = document["paths"].as_object().expect("paths");
    paths
        .iter()
        .flat_map(|(path, item)| {
            let item = item.as_object().expect("path item");
            item.iter().map(|(method, operation)| (path.clone(), method.clone(), operation.clone()))
        })
        .collect()
}

#[tokio::test]
async fn the_openapi_document_declares_every_constraint_and_status_the_service_answers() {
    let app = offline_app(Duration::from_secs(5));
    let document = get(&app, "/openapi.json").await.json();
    for (path, method, operation) in operations(&document) {
        let name = format!("{method} {path}");
        let parameters = operation["parameters"].as_array().cloned().unwrap_or_default();
        let parameter = |wanted: &str| parameters.iter().find(|parameter| parameter["name"] == wanted).cloned();
        for id in ["productId", "userId"] {
            if let Some(id) = parameter(id) {
                let schema = &id["schema"];
                assert_eq!((&schema["minLength"], &schema["maxLength"]), (&10.into(), &10.into()), "{name}");
                assert_eq!(schema["pattern"], "^[ -.0-~]{10}$", "{name}");
            }
        }
        if let Some(limit) = parameter("limit") {
            assert_eq!((&limit["schema"]["minimum"], &limit["schema"]["maximum"]), (&1.into(), &100.into()), "{name}");
        }
        if let Some(cursor) = parameter("cursor") {
            assert!(cursor["schema"]["pattern"].is_string(), "{name}: the cursor's alphabet");
        }
        let responses = operation["responses"].as_object().expect("responses");
        let has = |status: &str| responses.contains_key(status);
        if parameters.iter().any(|parameter| parameter["in"] == "path" || parameter["name"] == "limit") {
            assert!(has("400"), "{name} answers 400 for a bad id or limit");
        }
        if has("503") {
            assert!(has("500"), "{name} reads HBase and can answer 500");
            assert!(responses["503"]["headers"].get("Retry-After").is_some(), "{name}: Retry-After on 503");
        }
        let widget = path.ends_with("/reviews.html");
        if method == "get"
            && (path.contains("/comments")
                || path.ends_with("/summaries")
                || path.starts_with("/v1/reviews/")
                || widget)
        {
            assert!(has("304"), "{name} answers conditional GETs");
            assert!(responses["200"]["headers"].get("ETag").is_some(), "{name}: ETag on 200");
            assert!(parameter("If-None-Match").is_some(), "{name}: If-None-Match");
            let cached =
                path.ends_with("/ranked") || path.ends_with("/summary") || path.ends_with("/summaries") || widget;
            assert_eq!(responses["200"]["headers"].get("Cache-Control").is_some(), cached, "{name}: Cache-Control");
        }
        if method == "post" {
            for status in ["400", "413", "415"] {
                assert!(has(status), "{name} answers {status} for a bad body");
            }
        }
    }
    let summary = &document["paths"]["/v1/products/{productId}/comments/summary"]["get"]["responses"];
    assert!(summary.get("404").is_some(), "a product no run counted answers 404");
    let request = &document["components"]["schemas"]["SeedPageRequest"];
    assert_eq!(request["required"], serde_json::json!(["startIndexKey"]), "{request}");
    assert_eq!(request["properties"]["startIndexKey"]["format"], "byte");
    assert_eq!(request["properties"]["startIndexKey"]["type"], "string", "null is refused, so not allowed");

    // Typed for generated clients: enums, and arrays sent comma-separated.
    let parameter_of = |path: &str, name: &str| {
        document["paths"][path]["get"]["parameters"]
            .as_array()
            .into_iter()
            .flatten()
            .find(|parameter| parameter["name"] == name)
            .cloned()
            .unwrap_or_else(|| panic!("{path} has no parameter {name}"))
    };
    let comments = "/v1/products/{productId}/comments";
    let rating = parameter_of(comments, "rating");
    assert_eq!((&rating["style"], &rating["explode"]), (&"form".into(), &false.into()), "{rating}");
    assert_eq!(rating["schema"]["type"], "array");
    assert_eq!(rating["schema"]["items"], serde_json::json!({"type": "integer", "minimum": 1, "maximum": 5}));
    assert_eq!(
        parameter_of(comments, "sort")["schema"]["enum"],
        serde_json::json!(["newest", "rating_desc", "rating_asc"])
    );
    for path in
        [comments, "/v1/users/{userId}/comments", "/v1/products/{productId}/comments/ranked", "/v1/reviews/{reviewId}"]
    {
        assert_eq!(parameter_of(path, "include")["schema"]["enum"], serde_json::json!(["author"]), "{path}");
    }
    let product_ids = parameter_of("/v1/summaries", "productIds");
    assert_eq!(
        (&product_ids["required"], &product_ids["style"], &product_ids["explode"]),
        (&true.into(), &"form".into(), &false.into())
    );
    assert_eq!((&product_ids["schema"]["type"], &product_ids["schema"]["maxItems"]), (&"array".into(), &100.into()));
    assert_eq!(product_ids["schema"]["items"]["pattern"], "^[ -+.0-~-]{10}$");
    assert!(document["paths"]["/v1/summaries"]["get"]["responses"].get("400").is_some());
    let review = &document["paths"]["/v1/reviews/{reviewId}"]["get"]["responses"];
    assert!(review.get("404").is_some() && review.get("304").is_some(), "{review}");
}

#[tokio::test]
async fn the_docs_page_loads_nothing_from_the_internet() {
    let app = offline_app(Duration::from_secs(5));
    assert_eq!(get(&app, "/docs").await.status, StatusCode::SEE_OTHER);
    let page = get(&app, "/docs/").await;
    assert_eq!(page.status, StatusCode::OK);
    let html = page.text();
    assert!(html.contains("swagger-ui-bundle.js"), "{html}");
    // Every asset the page names is served by this service.
    let mut assets = Vec::new();
    for attribute in ["src=\"", "href=\""] {
        for piece in html.split(attribute).skip(1) {
            let asset = piece.split('"').next().unwrap_or_default().to_owned();
            assert!(!asset.contains("//"), "the page references an external asset: {asset}");
            assets.push(asset.trim_start_matches("./").to_owned());
        }
    }
    assert!(assets.len() >= 5, "{assets:?}");
    for asset in &assets {
        let answer = get(&app, &format!("/docs/{asset}")).await;
        assert_eq!(answer.status, StatusCode::OK, "/docs/{asset}");
        if asset.ends_with(".css") {
            // CSS may only use inline data: URLs (the SVG namespace inside them is not fetched).
            for reference in answer.text().split("url(").skip(1) {
                let target = reference.trim_start_matches(['"', '\'']);
                assert!(target.starts_with("data:"), "{asset} loads {}", &target[..target.len().min(60)]);
            }
        }
    }
    // The validator badge is the one thing Swagger UI would fetch from the internet.
    let initializer = get(&app, "/docs/swagger-initializer.js").await.text();
    assert!(initializer.contains(r#""validatorUrl": "none""#), "{initializer}");
    assert!(initializer.contains("/openapi.json"), "{initializer}");
}
