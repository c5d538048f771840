//! Signing and verifying agentry's JWTs (HS256, `kid`, `iss`, `aud`, `exp`, `jti`).

use std::collections::HashMap;
use std::sync::Mutex;

use chrono::{DateTime, TimeZone, Utc};
use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

use crate::config::AuthSettings;
use crate::crypto;
use crate::model::{CredentialId, TenantId, TokenId};

const ALGORITHM: Algorithm = Algorithm::HS256;
/// `sub` of admin tokens.
pub const ADMIN_SUBJECT: &str = "admin";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    Admin,
    Tenant,
}

#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Claims {
    pub iss: String,
    pub aud: String,
    pub sub: String,
    pub role: Role,
    pub iat: i64,
    pub exp: i64,
    pub jti: TokenId,
    /// The credential a token was obtained with, so deleting it ends the token too.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cid: Option<CredentialId>,
}

/// Who a verified token speaks for.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Principal {
    Admin,
    Tenant {
        tenant_id: TenantId,
        jti: TokenId,
        credential: Option<CredentialId>,
    },
}

/// A freshly signed token.
#[derive(Debug, Clone)]
pub struct SignedToken {
    pub token: String,
    pub jti: TokenId,
    pub issued_at: DateTime<Utc>,
    pub expires_at: DateTime<Utc>,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
#[error("invalid token")]
pub struct InvalidToken;

struct VerifyingKey {
    kid: String,
    key: DecodingKey,
}

/// The current signing key and every key whose tokens still verify.
pub struct TokenKeys {
    kid: String,
    signing: EncodingKey,
    verifying: Vec<VerifyingKey>,
    validation: Validation,
    issuer: String,
    audience: String,
    /// Tokens verified lately, by their whole text, with what they say and when they expire:
    /// a client sends the same token with every request, and its signature (an HMAC over
    /// the token) is checked once, its expiry every time.
    verified: Mutex<HashMap<TokenText, (Principal, i64)>>,
}

/// Most tokens remembered as verified; a full map drops the expired ones, then all.
const MAX_VERIFIED: usize = 10_000;

/// A token's text as a key, compared in a time that does not depend on where two texts
/// differ.
struct TokenText(Box<str>);

impl std::hash::Hash for TokenText {
    fn hash<H: std::hash::Hasher>(&self, state: &mut H) {
        self.0.hash(state);
    }
}

impl PartialEq for TokenText {
    fn eq(&self, other: &Self) -> bool {
        let (a, b) = (self.0.as_bytes(), other.0.as_bytes());
        a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
    }
}

impl Eq for TokenText {}

impl std::fmt::Debug for TokenKeys {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenKeys").field("kid", &self.kid).finish()
    }
}

impl TokenKeys {
    /// `current` signs; it and `previous` verify.
    pub fn new(settings: &AuthSettings, current: &str, previous: &[&str]) -> Self {
        let verifying = std::iter::once(current)
            .chain(previous.iter().copied())
            .map(|secret| VerifyingKey {
                kid: crypto::fingerprint(secret.as_bytes()),
                key: DecodingKey::from_secret(secret.as_bytes()),
            })
            .collect();
        let mut validation = Validation::new(ALGORITHM);
        validation.set_issuer(&[&settings.issuer]);
        validation.set_audience(&[&settings.audience]);
        validation.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        validation.validate_nbf = true;
        validation.leeway = 30;
        Self {
            kid: crypto::fingerprint(current.as_bytes()),
            signing: EncodingKey::from_secret(current.as_bytes()),
            verifying,
            validation,
            issuer: settings.issuer.clone(),
            audience: settings.audience.clone(),
            verified: Mutex::new(HashMap::new()),
        }
    }

    pub fn sign(
        &self,
        subject: &str,
        role: Role,
        ttl_seconds: u64,
        credential: Option<&CredentialId>,
    ) -> SignedToken {
        let jti = TokenId::generate();
        let issued_at = crate::model::now();
        let ttl = i64::try_from(ttl_seconds).unwrap_or(i64::MAX);
        let exp = issued_at.timestamp().saturating_add(ttl);
        let claims = Claims {
            iss: self.issuer.clone(),
            aud: self.audience.clone(),
            sub: subject.to_owned(),
            role,
            iat: issued_at.timestamp(),
            exp,
            jti,
            cid: credential.cloned(),
        };
        let mut header = Header::new(ALGORITHM);
        header.kid = Some(self.kid.clone());
        let token = jsonwebtoken::encode(&header, &claims, &self.signing)
            .expect("HS256 signing cannot fail");
        SignedToken {
            token,
            jti,
            issued_at,
            expires_at: Utc.timestamp_opt(exp, 0).single().unwrap_or(issued_at),
        }
    }

    /// Checks the signature (with the key its `kid` names), the algorithm, `exp`, `nbf`, `iss`
    /// and `aud`, and that subject and role agree. Revocation is the store's business.
    pub fn verify(&self, token: &str) -> Result<Principal, InvalidToken> {
        let text = TokenText(token.into());
        let now = crate::model::now().timestamp();
        let leeway = i64::try_from(self.validation.leeway).unwrap_or(i64::MAX);
        let cached = self
            .verified
            .lock()
            .expect("verified tokens lock")
            .get(&text)
            .cloned();
        if let Some((principal, exp)) = cached {
            // As `decode` judges it: expired once `exp` is more than the leeway ago.
            return if exp >= now.saturating_sub(leeway) {
                Ok(principal)
            } else {
                Err(InvalidToken)
            };
        }
        let (principal, exp) = self.verify_signed(token)?;
        let mut verified = self.verified.lock().expect("verified tokens lock");
        if verified.len() >= MAX_VERIFIED {
            verified.retain(|_, (_, exp)| *exp >= now.saturating_sub(leeway));
            if verified.len() >= MAX_VERIFIED {
                verified.clear();
            }
        }
        verified.insert(text, (principal.clone(), exp));
        Ok(principal)
    }

    /// `verify` without what was remembered: the principal and the token's `exp`.
    fn verify_signed(&self, token: &str) -> Result<(Principal, i64), InvalidToken> {
        let header = jsonwebtoken::decode_header(token).map_err(|_| InvalidToken)?;
        if header.alg != ALGORITHM {
            return Err(InvalidToken);
        }
        let kid = header.kid.ok_or(InvalidToken)?;
        let key = self
            .verifying
            .iter()
            .find(|k| k.kid == kid)
            .ok_or(InvalidToken)?;
        let claims = jsonwebtoken::decode::<Claims>(token, &key.key, &self.validation)
            .map_err(|_| InvalidToken)?
            .claims;
        let principal = match claims.role {
            Role::Admin if claims.sub == ADMIN_SUBJECT => Principal::Admin,
            Role::Tenant => Principal::Tenant {
                tenant_id: claims.sub.parse().map_err(|_| InvalidToken)?,
                jti: claims.jti,
                credential: claims.cid,
            },
            Role::Admin => return Err(InvalidToken),
        };
        Ok((principal, claims.exp))
    }
}

#[cfg(test)]
mod proptests;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::Settings;

    fn keys(secret: &str, previous: &[&str]) -> TokenKeys {
        let settings = Settings::from_toml("").unwrap();
        TokenKeys::new(&settings.auth, secret, previous)
    }

    #[test]
    fn tokens_verify_with_their_key_and_after_rotation() {
        let old = keys("old-secret-old-secret-old-secret-0", &[]);
        let tenant = TenantId::generate();
        let signed = old.sign(&tenant.to_string(), Role::Tenant, 60, None);
        assert!(matches!(
            old.verify(&signed.token),
            Ok(Principal::Tenant { tenant_id, .. }) if tenant_id == tenant
        ));
        let rotated = keys(
            "new-secret-new-secret-new-secret-1",
            &["old-secret-old-secret-old-secret-0"],
        );
        assert!(rotated.verify(&signed.token).is_ok());
        let fresh = keys("new-secret-new-secret-new-secret-1", &[]);
        assert_eq!(fresh.verify(&signed.token), Err(InvalidToken));
    }

    #[test]
    fn a_verified_token_is_remembered_but_its_expiry_is_checked_each_time() {
        let keys = keys("some-secret-some-secret-some-secret", &[]);
        let tenant = TenantId::generate();
        let signed = keys.sign(&tenant.to_string(), Role::Tenant, 60, None);
        let first = keys.verify(&signed.token).unwrap();
        assert_eq!(keys.verify(&signed.token), Ok(first.clone()));
        assert_eq!(keys.verified.lock().unwrap().len(), 1, "verified once");
        // Another text is checked on its own, however close to a remembered one.
        let mut forged = signed.token.clone();
        let last = forged.pop().unwrap();
        forged.push(if last == 'A' { 'B' } else { 'A' });
        assert_eq!(keys.verify(&forged), Err(InvalidToken));
        assert_eq!(
            keys.verified.lock().unwrap().len(),
            1,
            "a refused token is not kept"
        );
        // A remembered token whose `exp` is past (beyond the leeway) is refused.
        let past = crate::model::now().timestamp() - 31;
        keys.verified
            .lock()
            .unwrap()
            .insert(TokenText(signed.token.as_str().into()), (first, past));
        assert_eq!(keys.verify(&signed.token), Err(InvalidToken));
    }

    #[test]
    fn admin_tokens_need_the_admin_subject() {
        let keys = keys("some-secret-some-secret-some-secret", &[]);
        let admin = keys.sign(ADMIN_SUBJECT, Role::Admin, 60, None);
        assert_eq!(keys.verify(&admin.token), Ok(Principal::Admin));
        let forged = keys.sign("ten_x", Role::Admin, 60, None);
        assert_eq!(keys.verify(&forged.token), Err(InvalidToken));
    }
}
