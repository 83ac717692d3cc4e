//! A small connection pool: at most `size` connections, idle ones kept for
//! reuse, closed ones dropped.

use crate::error::PgStoreError;
use crate::tls::PgConfig;
use std::sync::Mutex;
use tokio::sync::{Semaphore, SemaphorePermit};
use tokio_postgres::{Client, NoTls};

pub(crate) struct Pool {
    config: PgConfig,
    idle: Mutex<Vec<Client>>,
    permits: Semaphore,
}

/// A connection on loan; it goes back to the pool when dropped.
pub(crate) struct Conn<'a> {
    client: Option<Client>,
    pool: &'a Pool,
    _permit: SemaphorePermit<'a>,
}

impl std::ops::Deref for Conn<'_> {
    type Target = Client;
    fn deref(&self) -> &Client {
        self.client
            .as_ref()
            .expect("a loaned connection is present until dropped")
    }
}

impl std::ops::DerefMut for Conn<'_> {
    fn deref_mut(&mut self) -> &mut Client {
        self.client
            .as_mut()
            .expect("a loaned connection is present until dropped")
    }
}

impl Drop for Conn<'_> {
    fn drop(&mut self) {
        if let Some(c) = self.client.take() {
            if !c.is_closed() {
                self.pool
                    .idle
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push(c);
            }
        }
    }
}

/// Opens one connection, over TLS as the configuration says
/// ([`crate::tls`]), and drives it on the runtime.
pub(crate) async fn connect(config: &PgConfig) -> Result<Client, PgStoreError> {
    match config.tls() {
        None => {
            let (client, connection) = config.connect(NoTls).await?;
            tokio::spawn(drive(connection));
            Ok(client)
        }
        Some(tls) => {
            let (client, connection) = config.connect(tls.clone()).await?;
            tokio::spawn(drive(connection));
            Ok(client)
        }
    }
}

async fn drive<F>(connection: F)
where
    F: std::future::Future<Output = Result<(), tokio_postgres::Error>>,
{
    if let Err(e) = connection.await {
        tracing::warn!(error = %crate::error::describe(&e), "postgres connection ended with an error");
    }
}

impl Pool {
    pub(crate) fn new(config: PgConfig, size: usize) -> Self {
        Pool {
            config,
            idle: Mutex::new(Vec::new()),
            permits: Semaphore::new(size.max(1)),
        }
    }

    pub(crate) async fn get(&self) -> Result<Conn<'_>, PgStoreError> {
        let permit = self
            .permits
            .acquire()
            .await
            .expect("the pool's semaphore is never closed");
        let reused = {
            let mut idle = self.idle.lock().unwrap_or_else(|p| p.into_inner());
            let mut found = None;
            while let Some(c) = idle.pop() {
                if !c.is_closed() {
                    found = Some(c);
                    break;
                }
            }
            found
        };
        let client = match reused {
            Some(c) => c,
            None => connect(&self.config).await?,
        };
        Ok(Conn {
            client: Some(client),
            pool: self,
            _permit: permit,
        })
    }
}
