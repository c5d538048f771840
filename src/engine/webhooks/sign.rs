//! Standard Webhooks secrets and signatures: a secret is `whsec_` and the base64 of random
//! bytes; a signature is `v1,` and the base64 of HMAC-SHA256 over `{id}.{timestamp}.{body}`
//! keyed with the secret's bytes.

use base64::Engine;
use base64::engine::general_purpose::STANDARD;
use hmac::{Hmac, Mac};
use sha2::Sha256;

const PREFIX: &str = "whsec_";
/// Random bytes in a new secret.
const SECRET_BYTES: usize = 32;

/// A new random secret.
pub fn new_secret() -> String {
    format!(
        "{PREFIX}{}",
        STANDARD.encode(crate::crypto::random_bytes::<SECRET_BYTES>())
    )
}

/// The key a secret stands for; `None` if it is not one of ours.
pub fn secret_key(secret: &str) -> Option<Vec<u8>> {
    STANDARD.decode(secret.strip_prefix(PREFIX)?).ok()
}

/// The `webhook-signature` value of one key: `v1,<base64>`.
pub fn signature(key: &[u8], id: &str, timestamp: i64, body: &[u8]) -> String {
    let mut mac = Hmac::<Sha256>::new_from_slice(key).expect("HMAC takes any key length");
    mac.update(id.as_bytes());
    mac.update(b".");
    mac.update(timestamp.to_string().as_bytes());
    mac.update(b".");
    mac.update(body);
    format!("v1,{}", STANDARD.encode(mac.finalize().into_bytes()))
}

/// The `webhook-signature` header: one signature per key, space-separated.
pub fn signatures(keys: &[Vec<u8>], id: &str, timestamp: i64, body: &[u8]) -> String {
    keys.iter()
        .map(|key| signature(key, id, timestamp, body))
        .collect::<Vec<_>>()
        .join(" ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn signatures_follow_the_standard_webhooks_example() {
        // The example of the Standard Webhooks specification.
        let key = secret_key("whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw").unwrap();
        let body = br#"{"test": 2432232314}"#;
        assert_eq!(
            signature(&key, "msg_p5jXN8AQM9LWM0D4loKWxJek", 1614265330, body),
            "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
        );
    }

    #[test]
    fn new_secrets_decode_to_their_random_bytes() {
        let secret = new_secret();
        assert!(secret.starts_with("whsec_"));
        assert_eq!(secret_key(&secret).unwrap().len(), SECRET_BYTES);
        assert_ne!(new_secret(), secret);
        assert!(secret_key("sk_nope").is_none());
        let keys = [vec![1u8; 24], vec![2u8; 24]];
        let header = signatures(&keys, "msg_x", 1, b"{}");
        assert_eq!(header.split(' ').count(), 2);
    }
}
