//! `GET /meta` reports exactly the configured agents and only true capabilities.

use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::helpers::{TestDb, spawn_app, spawn_app_on};

#[tokio::test]
async fn meta_lists_exactly_the_configured_agents() {
    let app = spawn_app().await;
    let meta = app.request(Method::GET, "/meta", None, None).await;
    assert_eq!(meta.status, StatusCode::OK);
    assert_eq!(meta.body["version"], 3);
    let agents = meta.body["agents"].as_array().unwrap();
    let names: Vec<&str> = agents.iter().map(|a| a["name"].as_str().unwrap()).collect();
    assert_eq!(names, ["echo", "tooly", "slow", "thinker"]);

    let tooly = &agents[1];
    assert_eq!(
        *tooly,
        json!({
            "name": "tooly",
            "title": "Tooly",
            "version": "2.1.0",
            "description": "An agent with options and tools.",
            "tools": [
                {"name": "clock", "description": "Tells the time.",
                 "parameters": {"type": "object", "properties": {"zone": {"type": "string"}}}},
                {"name": "calculator", "description": "Does arithmetic.",
                 "parameters": agentry::tools::Builtin::Calculator.parameters()}
            ],
            "options": [
                {"type": "select", "name": "model", "options": ["small", "large"], "default": "small"},
                {"type": "text", "name": "language", "default": "English"},
                {"type": "secret", "name": "api_key", "default": "***"}
            ],
            "capabilities": {
                "history": {"full": {}},
                "image": {"http": {}},
                "stream": {"delta": {}, "message": {}, "none": {}},
                "agentry": {"events": {}, "turns": {}, "cancel": {}, "idempotency": {}}
            }
        })
    );
    let echo = &agents[0];
    assert_eq!(
        echo["capabilities"]["history"],
        json!({"full": {}, "compacted": {}})
    );
    assert_eq!(
        echo["capabilities"]["image"],
        json!({"http": {}, "data": {}})
    );
    assert!(
        echo["capabilities"].get("application").is_none(),
        "echo takes no client tools"
    );
    assert_eq!(
        echo["options"][0]["default"], "",
        "an empty secret default says so"
    );
}

#[tokio::test]
async fn meta_can_require_a_token() {
    let db = std::sync::Arc::new(TestDb::new().await);
    let app = spawn_app_on(db, "[auth]\npublic_meta = false\n").await;
    let anonymous = app.request(Method::GET, "/meta", None, None).await;
    assert_eq!(anonymous.status, StatusCode::UNAUTHORIZED);
    let (_, token) = app.new_tenant().await;
    assert_eq!(app.get("/meta", &token).await.status, StatusCode::OK);
}
