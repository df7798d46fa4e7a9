//! Access keys: who may sign requests, and with which secret.

use s3s::auth::{S3Auth, SecretKey};
use s3s::{s3_error, S3Result};

/// An access key and its secret.
#[derive(Clone)]
pub struct Key {
    /// The access key id (public, appears in requests).
    pub access_key: String,
    /// The secret (never logged: `Debug` hides it).
    pub secret_key: String,
}

impl std::fmt::Debug for Key {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Key")
            .field("access_key", &self.access_key)
            .field("secret_key", &"<hidden>")
            .finish()
    }
}

/// The keys that sign requests to this node's S3 API.
#[derive(Debug)]
pub struct Keys {
    root: Key,
}

impl Keys {
    /// Keys with only the root key (all permissions).
    pub fn new(root: Key) -> Keys {
        Keys { root }
    }
}

#[async_trait::async_trait]
impl S3Auth for Keys {
    async fn get_secret_key(&self, access_key: &str) -> S3Result<SecretKey> {
        if access_key == self.root.access_key {
            return Ok(SecretKey::from(self.root.secret_key.clone()));
        }
        Err(s3_error!(
            InvalidAccessKeyId,
            "The AWS Access Key Id you provided does not exist in our records."
        ))
    }
}
