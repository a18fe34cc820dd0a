//! The one place where stored records become bytes and back.
//!
//! Invariant: every stored record starts with [`FORMAT_VERSION`]; a record with
//! another version byte is refused with [`CodecError::UnknownVersion`] instead of
//! being misread. bincode is pinned to 2.0.1 and used only here, so a change of
//! the wire format touches this module alone.

use serde::{Serialize, de::DeserializeOwned};

/// Version byte written in front of every record.
pub const FORMAT_VERSION: u8 = 1;

/// Version byte of a record that carries a tail after its format-1 body
/// (written by [`encode_tailed`] only when there is a tail to carry). A build
/// that reads format 1 only refuses such a record instead of dropping its tail.
pub const TAILED_VERSION: u8 = 2;

/// Version byte of an instance record in the rows layout: its history lives
/// in rows of its own, and the record always carries a tail. Records of
/// versions 1 and 2 are read as the layout before it and migrated on open.
pub const ROWS_VERSION: u8 = 3;

/// Version byte of an instance header: the instance without its tokens,
/// which are rows of their own (`tokens`). Records of versions 1 to 3 carry
/// their tokens inside and are migrated on open.
pub const HEADER_VERSION: u8 = 4;

/// Version byte of a record in a dictionary layout: its repeated texts
/// stored once (an instance's history rows, `store::history`). Rows of the
/// plain layout ([`FORMAT_VERSION`]) are read beside them.
pub const COMPACT_VERSION: u8 = 5;

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

/// Encodes `value` as a part of a record, without the version byte: what
/// [`encode`] writes for it inside a larger value.
pub fn encode_part<T: Serialize>(value: &T) -> Result<Vec<u8>, CodecError> {
    bincode::serde::encode_to_vec(value, config()).map_err(|e| CodecError::Encode(e.to_string()))
}

/// The bytes [`encode`] gives for a struct whose fields are `head`'s (a
/// tuple) followed by a sequence whose items were encoded by [`encode_part`]:
/// the items are encoded once, where they are made, and only copied here.
pub fn encode_with_parts<H: Serialize, P: AsRef<[u8]>>(
    head: &H,
    parts: &[P],
) -> Result<Vec<u8>, CodecError> {
    let mut out = vec![FORMAT_VERSION];
    out.extend_from_slice(&encode_part(head)?);
    // a sequence's length, as serde's `serialize_seq` gives it to bincode
    out.extend_from_slice(&encode_part(&(parts.len() as u64))?);
    out.reserve(parts.iter().map(|p| p.as_ref().len()).sum());
    for part in parts {
        out.extend_from_slice(part.as_ref());
    }
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

/// Encodes `value` as [`encode`] does, and with `tail` (when there is one)
/// after it under [`TAILED_VERSION`]: what a record gained after format 1
/// travels in its tail, and a record that needs none keeps format 1.
pub fn encode_tailed<T: Serialize, X: Serialize>(
    value: &T,
    tail: Option<&X>,
) -> Result<Vec<u8>, CodecError> {
    let mut out = encode(value)?;
    if let Some(tail) = tail {
        out[0] = TAILED_VERSION;
        let more = bincode::serde::encode_to_vec(tail, config())
            .map_err(|e| CodecError::Encode(e.to_string()))?;
        out.extend_from_slice(&more);
    }
    Ok(out)
}

/// Encodes `value` and `tail` under `version` (a layout of its own, such as
/// [`ROWS_VERSION`], that always carries a tail).
pub fn encode_versioned<T: Serialize, X: Serialize>(
    value: &T,
    tail: &X,
    version: u8,
) -> Result<Vec<u8>, CodecError> {
    let mut out = encode_tailed(value, Some(tail))?;
    out[0] = version;
    Ok(out)
}

/// The version byte of a stored record.
pub fn version_of(bytes: &[u8]) -> Result<u8, CodecError> {
    bytes.first().copied().ok_or(CodecError::Empty)
}

/// Decodes a record written by [`encode_versioned`] under `version`.
pub fn decode_versioned<T: DeserializeOwned, X: DeserializeOwned>(
    bytes: &[u8],
    version: u8,
) -> Result<(T, X), CodecError> {
    let (&found, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if found != version {
        return Err(CodecError::UnknownVersion { found });
    }
    let (value, used) = bincode::serde::decode_from_slice(body, config())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    let tail = decode_tail(body.get(used..).unwrap_or_default())?;
    Ok((value, tail))
}

fn decode_tail<X: DeserializeOwned>(rest: &[u8]) -> Result<X, CodecError> {
    let (tail, used) = bincode::serde::decode_from_slice(rest, config())
        .map_err(|e| CodecError::Decode(format!("record tail: {e}")))?;
    if used != rest.len() {
        return Err(CodecError::Decode(format!(
            "{} bytes after the record's tail",
            rest.len() - used
        )));
    }
    Ok(tail)
}

/// Decodes a record written by [`encode_tailed`] (or by [`encode`]): its tail,
/// or the default tail for a format-1 record. Bytes after the tail are refused.
pub fn decode_tailed<T: DeserializeOwned, X: DeserializeOwned + Default>(
    bytes: &[u8],
) -> Result<(T, X), CodecError> {
    let (&version, body) = bytes.split_first().ok_or(CodecError::Empty)?;
    if version != FORMAT_VERSION && version != TAILED_VERSION {
        return Err(CodecError::UnknownVersion { found: version });
    }
    let (value, used) = bincode::serde::decode_from_slice(body, config())
        .map_err(|e| CodecError::Decode(e.to_string()))?;
    if version == FORMAT_VERSION {
        return Ok((value, X::default()));
    }
    Ok((value, decode_tail(body.get(used..).unwrap_or_default())?))
}

/// Serde adapter that stores a JSON map as its JSON text, because bincode
/// cannot carry self-describing values such as `serde_json::Value`.
pub mod json_text {
    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &crate::model::Vars, s: S) -> Result<S::Ok, S::Error> {
        let text = serde_json::to_string(value).map_err(serde::ser::Error::custom)?;
        s.serialize_str(&text)
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<crate::model::Vars, D::Error> {
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
        vars: crate::model::Vars,
    }

    #[test]
    fn round_trip_keeps_json_variables() {
        let mut vars = crate::model::Vars::new();
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
    fn a_tail_travels_under_its_own_version_and_format_one_reads_as_no_tail() {
        let plain = encode_tailed(&7u64, None::<&Vec<u64>>).unwrap();
        assert_eq!(plain, encode(&7u64).unwrap());
        assert_eq!(
            decode_tailed::<u64, Vec<u64>>(&plain).unwrap(),
            (7, Vec::new())
        );
        let tailed = encode_tailed(&7u64, Some(&vec![0u64, 3])).unwrap();
        assert_eq!(tailed[0], TAILED_VERSION);
        assert_eq!(
            decode_tailed::<u64, Vec<u64>>(&tailed).unwrap(),
            (7, vec![0, 3])
        );
        // a format-1 reader refuses it rather than dropping the tail
        assert!(matches!(
            decode::<u64>(&tailed),
            Err(CodecError::UnknownVersion { found: 2 })
        ));
        let mut longer = tailed.clone();
        longer.push(0);
        assert!(matches!(
            decode_tailed::<u64, Vec<u64>>(&longer),
            Err(CodecError::Decode(_))
        ));
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
