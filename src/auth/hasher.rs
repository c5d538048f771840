//! Hashing new client secrets: one thread of its own, which keeps one argon2 buffer
//! (~19 MiB) for its life, hashes one secret at a time. Hashing on the blocking pool left
//! each of its threads' ~19 MiB to the allocator: 30 credentials took the process from
//! 125 to 543 MB.

use std::sync::{Mutex, OnceLock, mpsc};

use tokio::sync::oneshot;

use super::AuthError;
use crate::crypto;

type Job = (String, oneshot::Sender<String>);

fn hasher() -> Option<&'static Mutex<mpsc::Sender<Job>>> {
    static HASHER: OnceLock<Option<Mutex<mpsc::Sender<Job>>>> = OnceLock::new();
    HASHER
        .get_or_init(|| {
            let (sender, receiver) = mpsc::channel::<Job>();
            std::thread::Builder::new()
                .name("password-hash".into())
                .spawn(move || {
                    let mut memory = Vec::new();
                    while let Ok((secret, reply)) = receiver.recv() {
                        let _ = reply.send(crypto::hash_password_in(&secret, &mut memory));
                    }
                })
                .ok()
                .map(|_| Mutex::new(sender))
        })
        .as_ref()
}

/// The argon2id PHC string of `secret`, hashed on the hashing thread.
pub async fn hash_secret(secret: String) -> Result<String, AuthError> {
    let (reply, hashed) = oneshot::channel();
    hasher()
        .ok_or(AuthError::Internal("the password hasher cannot start"))?
        .lock()
        .unwrap_or_else(|e| e.into_inner())
        .send((secret, reply))
        .map_err(|_| AuthError::Internal("the password hasher stopped"))?;
    hashed
        .await
        .map_err(|_| AuthError::Internal("hashing the client secret failed"))
}
