//! Claim-check objects: the checked reference to a Cloud Storage object
//! ([`ObjectRef`]), how a job finds one among its variables
//! ([`JobContext::claim_check`]) and the store the edges read and write them
//! through ([`ObjectStore`]; Cloud Storage in `pubsub::storage`).
//!
//! Invariant: a reference is checked where it enters (bucket and object names,
//! generation); a reference whose object cannot be read is an error naming the
//! object ([`ObjectError`]) — a handler that returns it with `?` fails its job,
//! which is retried and then becomes an incident, never completed without its
//! data. postfach never deletes an object (bucket lifecycle rules do).

use crate::engine::JobContext;
use crate::handler::HandlerError;
use serde_json::Value;
use std::future::Future;
use std::pin::Pin;

/// A reference to a Cloud Storage object, checked: a bucket name of 3–222
/// characters of `a-z 0-9 - _ .`, an object name of 1–1024 bytes without
/// line breaks, a generation of digits.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ObjectRef {
    /// The bucket.
    pub bucket: String,
    /// The object name.
    pub object: String,
    /// The object generation, when the reference pins one.
    pub generation: Option<u64>,
}

impl ObjectRef {
    /// Checks the three parts (the generation as text, as Cloud Storage's
    /// notification attributes carry it).
    pub fn new(bucket: &str, object: &str, generation: Option<&str>) -> Result<Self, String> {
        let bucket_ok = (3..=222).contains(&bucket.len())
            && bucket.bytes().all(|b| {
                b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'-' | b'_' | b'.')
            });
        if !bucket_ok {
            return Err(format!(
                "bucket '{}' is not a Cloud Storage bucket name (3-222 characters of a-z, 0-9, '-', '_', '.')",
                bucket.chars().take(64).collect::<String>()
            ));
        }
        if object.is_empty() || object.len() > 1024 || object.contains(['\r', '\n']) {
            return Err(format!(
                "object name of {} bytes is not a Cloud Storage object name (1-1024 bytes, no line breaks)",
                object.len()
            ));
        }
        let generation = match generation.map(str::trim).filter(|g| !g.is_empty()) {
            None => None,
            Some(g) => Some(
                g.parse::<u64>()
                    .ok()
                    .filter(|_| g.bytes().all(|b| b.is_ascii_digit()))
                    .ok_or_else(|| {
                        format!(
                            "generation '{}' is not a number",
                            g.chars().take(32).collect::<String>()
                        )
                    })?,
            ),
        };
        Ok(ObjectRef {
            bucket: bucket.to_string(),
            object: object.to_string(),
            generation,
        })
    }

    /// Parses `gs://BUCKET/OBJECT` with an optional `#GENERATION`.
    pub fn parse_uri(uri: &str) -> Result<Self, String> {
        let rest = uri
            .strip_prefix("gs://")
            .ok_or_else(|| "is not a gs://BUCKET/OBJECT URI".to_string())?;
        let (path, generation) = match rest.rsplit_once('#') {
            Some((p, g)) => (p, Some(g)),
            None => (rest, None),
        };
        let (bucket, object) = path
            .split_once('/')
            .ok_or_else(|| "is not a gs://BUCKET/OBJECT URI (no object name)".to_string())?;
        ObjectRef::new(bucket, object, generation)
    }

    /// The variable value: `{"bucket", "object", "generation"}` (the
    /// generation as a string, as Cloud Storage's JSON API writes it, or null).
    pub fn to_value(&self) -> Value {
        serde_json::json!({
            "bucket": self.bucket,
            "object": self.object,
            "generation": self.generation.map(|g| g.to_string()),
        })
    }

    /// `gs://BUCKET/OBJECT`, with `#GENERATION` when pinned.
    pub fn to_uri(&self) -> String {
        match self.generation {
            Some(g) => format!("gs://{}/{}#{g}", self.bucket, self.object),
            None => format!("gs://{}/{}", self.bucket, self.object),
        }
    }

    /// Reads a variable value back: the object [`ObjectRef::to_value`] writes,
    /// or a `gs://` URI string.
    pub fn from_value(v: &Value) -> Result<Self, String> {
        match v {
            Value::String(uri) => Self::parse_uri(uri),
            Value::Object(m) => {
                let text = |k: &str| match m.get(k) {
                    Some(Value::String(s)) => Ok(Some(s.clone())),
                    Some(Value::Number(n)) => Ok(Some(n.to_string())),
                    None | Some(Value::Null) => Ok(None),
                    Some(_) => Err(format!("'{k}' is neither text nor a number")),
                };
                let bucket = text("bucket")?.ok_or("'bucket' is missing")?;
                let object = text("object")?.ok_or("'object' is missing")?;
                Self::new(&bucket, &object, text("generation")?.as_deref())
            }
            _ => Err("is neither a {bucket, object, generation} object nor a gs:// URI".into()),
        }
    }
}

impl std::fmt::Display for ObjectRef {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.to_uri())
    }
}

/// Why an object could not be read or written.
#[derive(Debug, Clone, thiserror::Error)]
#[non_exhaustive]
pub enum ObjectError {
    /// The job has no usable reference in that variable.
    #[error("variable '{variable}' of job {job}: {reason}")]
    NoReference {
        /// The job.
        job: u64,
        /// The variable.
        variable: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The object (or that generation of it) does not exist.
    #[error("object {reference} does not exist")]
    NotFound {
        /// `gs://…` of the object.
        reference: String,
    },
    /// The store could not be reached or refused the call.
    #[error("object {reference}: {reason}")]
    Unavailable {
        /// `gs://…` of the object.
        reference: String,
        /// What the store said.
        reason: String,
    },
    /// The object is larger than a claim check may be read into memory.
    #[error("object {reference} has more than {limit} bytes")]
    TooLarge {
        /// `gs://…` of the object.
        reference: String,
        /// The limit.
        limit: u64,
    },
    /// No object store is configured here.
    #[error("no object store is configured")]
    NotConfigured,
}

/// Largest object read into memory through [`ObjectStore::read`] (256 MiB).
pub const MAX_OBJECT_BYTES: u64 = 256 * 1024 * 1024;

/// The future an [`ObjectStore`] returns.
pub type ObjectFuture<'a, T> = Pin<Box<dyn Future<Output = Result<T, ObjectError>> + Send + 'a>>;

/// Where claim-check objects live: Cloud Storage (`pubsub::storage`), or
/// whatever a host plugs in.
pub trait ObjectStore: Send + Sync + 'static {
    /// The whole object (the pinned generation when the reference has one);
    /// [`ObjectError::NotFound`] when it does not exist.
    fn read<'a>(&'a self, reference: &'a ObjectRef) -> ObjectFuture<'a, Vec<u8>>;
    /// Writes `data` as `bucket/object` (a new generation when it exists) and
    /// returns the reference with the generation written.
    fn write<'a>(
        &'a self,
        bucket: &'a str,
        object: &'a str,
        data: Vec<u8>,
    ) -> ObjectFuture<'a, ObjectRef>;
}

impl From<ObjectError> for HandlerError {
    /// Every object error fails the attempt: retried, then an incident.
    fn from(e: ObjectError) -> Self {
        HandlerError::Failed(e.to_string())
    }
}

/// The claim-check reference in variable `variable` of job `job` (as the
/// ingress writes it, or a `gs://` URI); an error naming the job and variable
/// when it is missing or not a reference.
pub fn reference_in(
    job: u64,
    variables: &crate::model::Vars,
    variable: &str,
) -> Result<ObjectRef, ObjectError> {
    let no = |reason: String| ObjectError::NoReference {
        job,
        variable: variable.to_string(),
        reason,
    };
    let v = variables
        .get(variable)
        .ok_or_else(|| no("the instance has no such variable".into()))?;
    ObjectRef::from_value(v).map_err(no)
}

impl JobContext {
    /// The claim-check reference in variable `variable` ([`reference_in`]).
    pub fn claim_check(&self, variable: &str) -> Result<ObjectRef, ObjectError> {
        reference_in(self.job, &self.variables, variable)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn job(vars: Value) -> JobContext {
        JobContext {
            job: 7,
            instance: 1,
            element: "rechnungStellen".into(),
            topic: "rechnungStellen".into(),
            variables: vars.as_object().cloned().unwrap_or_default(),
            idempotency_key: "1:rechnungStellen:1".into(),
            attempt: 1,
            work: None,
        }
    }

    #[test]
    fn a_reference_round_trips_through_its_variable_and_its_uri() {
        let r = ObjectRef::new("abschluss", "A-1/protokoll.json", Some("17")).unwrap();
        assert_eq!(ObjectRef::from_value(&r.to_value()).unwrap(), r);
        assert_eq!(ObjectRef::parse_uri(&r.to_uri()).unwrap(), r);
        let unpinned = ObjectRef::new("abschluss", "x", None).unwrap();
        assert_eq!(ObjectRef::parse_uri(&unpinned.to_uri()).unwrap(), unpinned);
        assert_eq!(unpinned.to_uri(), "gs://abschluss/x");
    }

    #[test]
    fn a_job_names_what_is_wrong_with_its_reference() {
        let j = job(serde_json::json!({
            "ref": {"bucket": "b-1", "object": "o", "generation": "5"},
            "uri": "gs://b-1/o",
            "bad": {"bucket": "B!", "object": "o"},
            "num": 3
        }));
        assert_eq!(j.claim_check("ref").unwrap().generation, Some(5));
        assert_eq!(j.claim_check("uri").unwrap().object, "o");
        let missing = j.claim_check("protokoll").unwrap_err().to_string();
        assert!(
            missing.contains("'protokoll' of job 7") && missing.contains("no such variable"),
            "{missing}"
        );
        assert!(
            j.claim_check("bad")
                .unwrap_err()
                .to_string()
                .contains("bucket 'B!'")
        );
        assert!(
            j.claim_check("num")
                .unwrap_err()
                .to_string()
                .contains("neither")
        );
        // a handler that returns it with `?` fails its attempt
        let e: HandlerError = j.claim_check("protokoll").unwrap_err().into();
        assert!(matches!(e, HandlerError::Failed(m) if m.contains("protokoll")));
    }
}
