//! A Cloud Storage emulator (fake-gcs-server, installed by `go install` on
//! first use) per test, with a client and one bucket.
use postfach::objects::{ObjectRef, ObjectStore};
use postfach::pubsub::{CloudStorage, FakeGcs};
use std::sync::Arc;

pub const BUCKET: &str = "abschluss-protokolle";

pub struct Gcs {
    pub emulator: FakeGcs,
    pub store: Arc<CloudStorage>,
}

impl Gcs {
    /// Starts an emulator with bucket [`BUCKET`]; fails the test with the reason if it cannot.
    pub async fn start() -> Gcs {
        super::tools::go();
        let emulator =
            tokio::task::spawn_blocking(|| FakeGcs::start().unwrap_or_else(|e| panic!("{e}")))
                .await
                .unwrap();
        let store = CloudStorage::emulator(&emulator.endpoint()).await.unwrap();
        store.ensure_bucket(BUCKET).await.unwrap();
        Gcs {
            emulator,
            store: Arc::new(store),
        }
    }

    pub async fn put(&self, object: &str, data: &[u8]) -> ObjectRef {
        self.store
            .write(BUCKET, object, data.to_vec())
            .await
            .unwrap()
    }

    pub fn objects(&self) -> Vec<String> {
        self.emulator.objects(BUCKET)
    }
}
