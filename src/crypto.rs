//! Encryption of secret values at rest, random tokens and password hashing.

use argon2::Argon2;
use argon2::password_hash::{PasswordHasher, PasswordVerifier};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
use chacha20poly1305::aead::{Aead, KeyInit, Payload};
use chacha20poly1305::{XChaCha20Poly1305, XNonce};
use sha2::{Digest, Sha256};

use crate::model::sha256_hex;

pub use crate::config::parse_key;

const ENVELOPE_VERSION: &str = "v1";

/// `n` bytes from the operating system's CSPRNG.
pub fn random_bytes<const N: usize>() -> [u8; N] {
    let mut bytes = [0u8; N];
    getrandom::fill(&mut bytes).expect("the operating system's random source failed");
    bytes
}

/// A random string of `bytes` bytes of entropy, base64url without padding.
pub fn random_token(bytes: usize) -> String {
    let mut buf = vec![0u8; bytes];
    getrandom::fill(&mut buf).expect("the operating system's random source failed");
    URL_SAFE_NO_PAD.encode(buf)
}

/// A short, stable, non-reversible identifier of a key.
pub fn fingerprint(key: &[u8]) -> String {
    sha256_hex(key)[..16].to_owned()
}

/// Encodes a key the way `secrets.key` expects it.
pub fn encode_key(key: &[u8; 32]) -> String {
    STANDARD.encode(key)
}

#[derive(Debug, thiserror::Error)]
pub enum SealError {
    #[error("sealed value is malformed")]
    Malformed,
    #[error("sealed value was encrypted with key {0}, which is not configured")]
    UnknownKey(String),
    #[error("sealed value failed authentication")]
    Inauthentic,
}

/// Authenticated encryption of small secrets with a primary key and older keys that still
/// decrypt. A sealed value is `v1.<key fingerprint>.<base64url(nonce || ciphertext)>`, and
/// is bound to a context (such as the owning tenant and session) that must match on open.
#[derive(Clone)]
pub struct SecretBox {
    keys: Vec<(String, XChaCha20Poly1305)>,
    /// Derived from the primary key: keys digests that must not be a guessing oracle.
    mac_key: [u8; 32],
}

impl std::fmt::Debug for SecretBox {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let ids: Vec<&str> = self.keys.iter().map(|(id, _)| id.as_str()).collect();
        f.debug_struct("SecretBox").field("keys", &ids).finish()
    }
}

impl SecretBox {
    /// The first key encrypts; every key decrypts what it encrypted.
    pub fn new(primary: [u8; 32], older: impl IntoIterator<Item = [u8; 32]>) -> Self {
        let mut keys = Vec::new();
        for key in std::iter::once(primary).chain(older) {
            let id = fingerprint(&key);
            if keys.iter().any(|(k, _)| *k == id) {
                continue;
            }
            let cipher = XChaCha20Poly1305::new_from_slice(&key).expect("key is 32 bytes");
            keys.push((id, cipher));
        }
        let mac_key = Sha256::new()
            .chain_update(b"agentry/mac/v1\0")
            .chain_update(primary)
            .finalize()
            .into();
        Self { keys, mac_key }
    }

    /// HMAC-SHA256 of `data` for `purpose`, hex: a digest only the holder of the secrets
    /// key can compute, so a stored one tells a reader of the database nothing about what
    /// it digests.
    pub fn mac_hex(&self, purpose: &str, data: &[u8]) -> String {
        use hmac::{Hmac, Mac};
        let mut mac =
            Hmac::<Sha256>::new_from_slice(&self.mac_key).expect("HMAC takes any key length");
        mac.update(purpose.as_bytes());
        mac.update(b"\0");
        mac.update(data);
        mac.finalize()
            .into_bytes()
            .iter()
            .map(|b| format!("{b:02x}"))
            .collect()
    }

    pub fn seal(&self, plaintext: &[u8], context: &str) -> String {
        let (id, cipher) = &self.keys[0];
        let nonce_bytes = random_bytes::<24>();
        let nonce = XNonce::from(nonce_bytes);
        let ciphertext = cipher
            .encrypt(
                &nonce,
                Payload {
                    msg: plaintext,
                    aad: context.as_bytes(),
                },
            )
            .expect("encryption of a small value cannot fail");
        let mut blob = nonce_bytes.to_vec();
        blob.extend_from_slice(&ciphertext);
        format!("{ENVELOPE_VERSION}.{id}.{}", URL_SAFE_NO_PAD.encode(blob))
    }

    pub fn open(&self, sealed: &str, context: &str) -> Result<Vec<u8>, SealError> {
        let mut parts = sealed.splitn(3, '.');
        let (Some(ENVELOPE_VERSION), Some(id), Some(body)) =
            (parts.next(), parts.next(), parts.next())
        else {
            return Err(SealError::Malformed);
        };
        let blob = URL_SAFE_NO_PAD
            .decode(body)
            .map_err(|_| SealError::Malformed)?;
        if blob.len() < 24 {
            return Err(SealError::Malformed);
        }
        let (_, cipher) = self
            .keys
            .iter()
            .find(|(k, _)| k == id)
            .ok_or_else(|| SealError::UnknownKey(id.to_owned()))?;
        let (nonce, ciphertext) = blob.split_at(24);
        let nonce = XNonce::try_from(nonce).map_err(|_| SealError::Malformed)?;
        cipher
            .decrypt(
                &nonce,
                Payload {
                    msg: ciphertext,
                    aad: context.as_bytes(),
                },
            )
            .map_err(|_| SealError::Inauthentic)
    }
}

/// An argon2id PHC string of `password`. CPU-heavy: call from a blocking thread.
pub fn hash_password(password: &str) -> String {
    Argon2::default()
        .hash_password(password.as_bytes())
        .expect("argon2 with default parameters cannot fail")
        .to_string()
}

/// [`hash_password`] (argon2id, default parameters, a random 16-byte salt) working in
/// `memory`, grown as the parameters need and kept by the caller, so repeated hashes reuse
/// one buffer instead of allocating argon2's ~19 MiB each time.
pub fn hash_password_in(password: &str, memory: &mut Vec<argon2::Block>) -> String {
    use argon2::{Algorithm, Params, Version};
    use base64::engine::general_purpose::STANDARD_NO_PAD;
    let params = Params::default();
    let blocks = params.block_count();
    if memory.len() < blocks {
        memory.resize(blocks, argon2::Block::default());
    }
    let salt = random_bytes::<16>();
    let mut output = [0u8; 32];
    Argon2::new(Algorithm::Argon2id, Version::V0x13, params.clone())
        .hash_password_into_with_memory(
            password.as_bytes(),
            &salt,
            &mut output,
            &mut memory[..blocks],
        )
        .expect("argon2 with default parameters cannot fail");
    format!(
        "$argon2id$v=19$m={},t={},p={}${}${}",
        params.m_cost(),
        params.t_cost(),
        params.p_cost(),
        STANDARD_NO_PAD.encode(salt),
        STANDARD_NO_PAD.encode(output)
    )
}

/// Whether `password` matches the PHC string. CPU-heavy: call from a blocking thread.
pub fn verify_password(password: &str, phc: &str) -> bool {
    Argon2::default()
        .verify_password(password.as_bytes(), phc)
        .is_ok()
}

/// [`verify_password`] working in `memory` (grown as the hash's parameters need and kept
/// by the caller), so repeated verifications reuse one buffer instead of allocating
/// argon2's ~19 MiB each time.
pub fn verify_password_in(password: &str, phc: &str, memory: &mut Vec<argon2::Block>) -> bool {
    use argon2::{Algorithm, Params, PasswordHash, Version};
    use subtle::ConstantTimeEq;
    let Ok(hash) = PasswordHash::new(phc) else {
        return false;
    };
    let (Ok(algorithm), Ok(params), Some(salt), Some(expected)) = (
        Algorithm::try_from(hash.algorithm.as_str()),
        Params::try_from(&hash),
        hash.salt.as_ref(),
        hash.hash.as_ref(),
    ) else {
        return false;
    };
    let version = match hash.version.map(Version::try_from).transpose() {
        Ok(version) => version.unwrap_or_default(),
        Err(_) => return false,
    };
    let blocks = params.block_count();
    if memory.len() < blocks {
        memory.resize(blocks, argon2::Block::default());
    }
    let mut output = vec![0u8; expected.len()];
    let computed = Argon2::new(algorithm, version, params).hash_password_into_with_memory(
        password.as_bytes(),
        salt.as_ref(),
        &mut output,
        &mut memory[..blocks],
    );
    computed.is_ok() && bool::from(output.ct_eq(expected.as_bytes()))
}

/// Compares secrets in time independent of where they differ.
pub fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    use subtle::ConstantTimeEq;
    let (da, db) = (Sha256::digest(a), Sha256::digest(b));
    da.ct_eq(&db).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sealed_values_open_only_with_their_context_and_a_known_key() {
        let old = random_bytes::<32>();
        let new = random_bytes::<32>();
        let before = SecretBox::new(old, []);
        let sealed = before.seal(b"sk-live", "ten_1/sess_1");
        assert!(!sealed.contains("sk-live"));
        assert_eq!(before.open(&sealed, "ten_1/sess_1").unwrap(), b"sk-live");
        assert!(matches!(
            before.open(&sealed, "ten_2/sess_1"),
            Err(SealError::Inauthentic)
        ));

        let rotated = SecretBox::new(new, [old]);
        assert_eq!(rotated.open(&sealed, "ten_1/sess_1").unwrap(), b"sk-live");
        let resealed = rotated.seal(b"sk-live", "ctx");
        assert!(matches!(
            before.open(&resealed, "ctx"),
            Err(SealError::UnknownKey(_))
        ));
        assert!(matches!(
            rotated.open("v1.zz.notbase64!", "ctx"),
            Err(SealError::Malformed)
        ));
    }

    #[test]
    fn keys_parse_from_base64_of_32_bytes() {
        let key = random_bytes::<32>();
        assert_eq!(parse_key(&encode_key(&key)).unwrap(), key);
        assert!(parse_key("c2hvcnQ=").unwrap_err().contains("32 bytes"));
        assert!(parse_key("not base64 at all!").is_err());
    }

    #[test]
    fn passwords_verify_against_their_hash_only() {
        let phc = hash_password_in("correct horse", &mut Vec::new());
        assert!(verify_password("correct horse", &phc), "{phc}");
        assert!(!verify_password("wrong horse", &phc));
        let phc = hash_password("correct horse");
        assert!(phc.starts_with("$argon2id$"));
        assert!(verify_password("correct horse", &phc));
        assert!(!verify_password("wrong horse", &phc));
        assert!(!verify_password("correct horse", "not a phc string"));
        let mut memory = Vec::new();
        for _ in 0..2 {
            assert!(verify_password_in("correct horse", &phc, &mut memory));
            assert!(!verify_password_in("wrong horse", &phc, &mut memory));
        }
        assert!(!verify_password_in(
            "correct horse",
            "not a phc string",
            &mut memory
        ));
    }
}
