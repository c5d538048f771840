//! Properties of token verification over the JWT header: a token is accepted only when its
//! header names HS256 and a key we hold, whatever else the header carries; a token whose
//! header was altered, or any other text, is refused as `InvalidToken`, never a panic.

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use hmac::{Hmac, Mac};
use proptest::prelude::*;
use serde_json::{Map, Value, json};
use sha2::Sha256;

use super::{InvalidToken, Principal, TokenKeys};
use crate::config::Settings;
use crate::crypto;
use crate::model::TenantId;

const SECRET: &str = "proptest-secret-proptest-secret-0123";
const OTHER_SECRET: &str = "another-secret-another-secret-45678";

fn config() -> ProptestConfig {
    ProptestConfig {
        cases: 256,
        failure_persistence: None,
        ..ProptestConfig::default()
    }
}

fn keys() -> TokenKeys {
    let settings = Settings::from_toml("").unwrap();
    TokenKeys::new(&settings.auth, SECRET, &[])
}

/// Valid claims of a tenant token issued by `keys()`.
fn claims(tenant: &TenantId) -> Value {
    let settings = Settings::from_toml("").unwrap();
    let now = chrono::Utc::now().timestamp();
    json!({
        "iss": settings.auth.issuer,
        "aud": settings.auth.audience,
        "sub": tenant.to_string(),
        "role": "tenant",
        "iat": now,
        "exp": now + 600,
        "jti": crate::model::TokenId::generate(),
    })
}

/// A compact JWS of `header` and `claims`, signed with HMAC-SHA256 under `secret` whatever
/// the header says.
fn token(header: &Value, claims: &Value, secret: &str) -> String {
    let signing_input = format!(
        "{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string())
    );
    let mut mac = Hmac::<Sha256>::new_from_slice(secret.as_bytes()).unwrap();
    mac.update(signing_input.as_bytes());
    let signature = URL_SAFE_NO_PAD.encode(mac.finalize().into_bytes());
    format!("{signing_input}.{signature}")
}

/// A value for `alg`: the one we accept, near misses, other algorithms, or not a string.
fn alg() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(Some(json!("HS256"))),
        prop::sample::select(vec![
            "hs256", "HS384", "HS512", "none", "RS256", "ES256", ""
        ])
        .prop_map(|a| Some(json!(a))),
        "[A-Za-z0-9]{0,8}".prop_map(|a| Some(json!(a))),
        Just(Some(json!(256))),
        Just(Some(Value::Null)),
        Just(None),
    ]
}

/// A value for `kid`: the key's, another key's, any text, or not a string.
fn kid() -> impl Strategy<Value = Option<Value>> {
    prop_oneof![
        Just(Some(json!(crypto::fingerprint(SECRET.as_bytes())))),
        Just(Some(json!(crypto::fingerprint(OTHER_SECRET.as_bytes())))),
        any::<String>().prop_map(|k| Some(json!(k))),
        Just(Some(json!(7))),
        Just(Some(Value::Null)),
        Just(None),
    ]
}

/// Header members we do not act on: `typ`, and names of our own.
fn extras() -> impl Strategy<Value = Map<String, Value>> {
    (
        prop::option::of(prop::sample::select(vec!["JWT", "jwt", "at+jwt", ""])),
        prop::collection::btree_map("x_[a-z]{1,6}", any::<String>(), 0..3),
    )
        .prop_map(|(typ, others)| {
            let mut map: Map<String, Value> =
                others.into_iter().map(|(k, v)| (k, json!(v))).collect();
            if let Some(typ) = typ {
                map.insert("typ".into(), json!(typ));
            }
            map
        })
}

/// One character of `segment` replaced by another of the base64url alphabet.
fn altered(segment: &str, at: usize, by: u8) -> String {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let mut bytes = segment.as_bytes().to_vec();
    let at = at % bytes.len();
    let mut replacement = ALPHABET[by as usize % ALPHABET.len()];
    if replacement == bytes[at] {
        replacement = ALPHABET[(by as usize + 1) % ALPHABET.len()];
    }
    bytes[at] = replacement;
    String::from_utf8(bytes).unwrap()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn a_token_is_accepted_only_with_hs256_and_a_key_we_hold(
        alg in alg(),
        kid in kid(),
        extras in extras(),
    ) {
        let tenant = TenantId::generate();
        let mut header = extras;
        if let Some(alg) = &alg {
            header.insert("alg".into(), alg.clone());
        }
        if let Some(kid) = &kid {
            header.insert("kid".into(), kid.clone());
        }
        let ours = json!(crypto::fingerprint(SECRET.as_bytes()));
        let acceptable = alg == Some(json!("HS256")) && kid == Some(ours);
        let verified = keys().verify(&token(&Value::Object(header), &claims(&tenant), SECRET));
        if acceptable {
            prop_assert!(
                matches!(verified, Ok(Principal::Tenant { tenant_id, .. }) if tenant_id == tenant),
                "{:?}", verified
            );
        } else {
            prop_assert_eq!(verified, Err(InvalidToken));
        }
    }

    #[test]
    fn a_token_under_another_key_is_refused_whatever_its_header_says(kid in kid()) {
        let mut header = Map::new();
        header.insert("alg".into(), json!("HS256"));
        if let Some(kid) = kid {
            header.insert("kid".into(), kid);
        }
        let forged = token(&Value::Object(header), &claims(&TenantId::generate()), OTHER_SECRET);
        prop_assert_eq!(keys().verify(&forged), Err(InvalidToken));
    }

    #[test]
    fn an_altered_header_is_refused(at in any::<usize>(), by in any::<u8>()) {
        let keys = keys();
        let signed = keys.sign(&TenantId::generate().to_string(), super::Role::Tenant, 60, None);
        let (header, rest) = signed.token.split_once('.').unwrap();
        let token = format!("{}.{rest}", altered(header, at, by));
        prop_assert_eq!(keys.verify(&token), Err(InvalidToken));
    }

    #[test]
    fn any_other_text_is_refused(text in any::<String>()) {
        prop_assert_eq!(keys().verify(&text), Err(InvalidToken));
    }

    #[test]
    fn three_base64url_segments_are_refused(
        token in "[A-Za-z0-9_-]{0,64}\\.[A-Za-z0-9_-]{0,64}\\.[A-Za-z0-9_-]{0,64}",
    ) {
        prop_assert_eq!(keys().verify(&token), Err(InvalidToken));
    }
}
