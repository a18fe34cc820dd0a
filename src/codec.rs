//! The one place where stored records become bytes and back.
//!
//! Invariant: every stored record starts with [`FORMAT_VERSION`]; a record with
//! another version byte is refused with [`CodecError::UnknownVersion`] instead of
//! being misread. bincode is pinned to 2.0.1 and used only here, so a change of
//! the wire format touches this module alone.

use serde::{Serialize, de::DeserializeOwned};

/// Version byte written in front of every record.
pub const FORMAT_VERSION: u8 = 1;

/// A record that could not be encoded or decoded.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum CodecError {
    /// The record was written by a format this build does not read.
    #[error(
        "stored record has format version {found}, this build reads version {FORMAT_VERSION}: open the database with the release that wrote it"
    )]
    UnknownVersion {
        /// The version byte found.
        found: u8,
    },
    /// The record is empty or cut short.
    #[error("stored record is empty: the database file may be damaged")]
    Empty,
    /// bincode refused the bytes.
    #[error("stored record cannot be decoded ({0}): the database file may be damaged")]
    Decode(String),
    /// bincode refused the value.
    #[error("record cannot be encoded: {0}")]
    Encode(String),
}

fn config() -> bincode::config::Configuration {
    bincode::config::standard()
}

/// Encodes `value` behind the format version byte.
pub fn encode<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![FORMAT_VERSION];
    let body = bincode::serde::encode_to_vec(value, config())
        .map_err(|e| CodecError::Encode(e.to_string()))?;
    out.extend_from_slice(&body);
    Ok(out)
}

/// Decodes a record written by [`encode`].
pub fn decode<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != FORMAT_VERSION {
        return Err(CodecError::UnknownVersion { found: version });
    }
    let (value, _) = bincode::serde::decode_from_slice(body, config())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    Ok(value)
}

/// Serde adapter that stores a JSON map as its JSON text, because bincode
/// cannot carry self-describing values such as `serde_json::Value`.
pub mod json_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &crate::Vars, s: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(value).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<crate::Vars, D::Error> {
        let text = String::deserialize(d)?;
        serde_json::from_str(&text).map_err(serde::de::Error::custom)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Rec {
        a: u64,
        b: String,
        #[serde(with = "json_text")]
        vars: crate::Vars,
    }

    #[test]
    fn round_trip_keeps_json_variables() {
        let mut vars = crate::Vars::new();
        vars.insert("auftragId".into(), serde_json::json!({"x": [1, 2.5, null]}));
        let rec = Rec {
            a: 7,
            b: "x".into(),
            vars,
        };
        let bytes = encode(&rec).unwrap();
        assert_eq!(bytes[0], FORMAT_VERSION);
        assert_eq!(decode::<Rec>(&bytes).unwrap(), rec);
    }

    #[test]
    fn other_version_is_refused_not_misread() {
        let mut bytes = encode(&5u64).unwrap();
        bytes[0] = 9;
        assert!(matches!(
            decode::<u64>(&bytes),
            Err(CodecError::UnknownVersion { found: 9 })
        ));
        assert!(matches!(decode::<u64>(&[]), Err(CodecError::Empty)));
    }
}
