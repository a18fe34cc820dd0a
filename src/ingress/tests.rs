//! Tests of `ingress`.

use super::*;

fn incoming(data: &str, attrs: &[(&str, &str)]) -> Incoming {
    Incoming {
        data: data.as_bytes().to_vec(),
        attributes: attrs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect(),
        broker_id: "ps-1".into(),
        publish_time: Some(1_000),
        delivery_attempt: Some(3),
    }
}

fn decoder() -> Decoder {
    SubscriptionConfig::new(
        "auftrag-abgeschlossen-sub",
        "AuftragAbgeschlossen",
        "/auftragId",
    )
    .compile()
    .unwrap()
}

#[test]
fn key_from_payload_id_from_attribute_all_fields_become_variables() {
    let d = decoder().decode(&incoming(
        r#"{"auftragId": "4711", "erledigtePositionen": 3}"#,
        &[("eventId", "evt-9")],
    ));
    let Decoded::Publish(p) = d else {
        panic!("expected a publish, got {d:?}")
    };
    assert_eq!(p.key, "4711");
    assert_eq!(p.message_id.as_deref(), Some("evt-9"));
    assert_eq!(p.variables["erledigtePositionen"], 3);
    assert!(
        p.attributes
            .contains(&("pubsub.delivery_attempt".into(), "3".into()))
    );
    assert!(
        p.attributes
            .contains(&("pubsub.message_id".into(), "ps-1".into()))
    );
}

#[test]
fn message_id_falls_back_to_the_broker_id_and_numeric_keys_are_strings() {
    let Decoded::Publish(p) = decoder().decode(&incoming(r#"{"auftragId": 4711}"#, &[])) else {
        panic!()
    };
    assert_eq!(p.message_id.as_deref(), Some("ps-1"));
    assert_eq!(p.key, "4711");
}

#[test]
fn undecodable_payloads_become_malformed_with_raw_bytes() {
    for (data, why) in [
        ("{not json", "not JSON"),
        ("[1,2]", "not an object"),
        (r#"{"other": 1}"#, "correlation key"),
        (r#"{"auftragId": ""}"#, "correlation key"),
    ] {
        let Decoded::Malformed(m) = decoder().decode(&incoming(data, &[("eventId", "e")])) else {
            panic!("{data} decoded")
        };
        assert_eq!(m.raw, data.as_bytes());
        assert!(m.error.contains(why), "{data}: {}", m.error);
        assert_eq!(m.message_id, "e");
        assert_eq!(m.name, "AuftragAbgeschlossen");
    }
}

#[test]
fn selected_variables_and_attribute_keys() {
    let mut c = SubscriptionConfig::new("s", "M", "attribute:order");
    c.variables = Some(vec!["/a/b".into()]);
    c.ttl = Some("5m".into());
    let Decoded::Publish(p) = c.compile().unwrap().decode(&incoming(
        r#"{"a": {"b": true}, "c": 1}"#,
        &[("order", "7")],
    )) else {
        panic!()
    };
    assert_eq!(p.key, "7");
    assert_eq!(p.ttl, Some(300_000));
    assert_eq!(p.variables.len(), 1);
    assert_eq!(p.variables["b"], true);
}

#[test]
fn bad_configuration_names_the_field() {
    let mut c = SubscriptionConfig::new("s", "M", "auftragId");
    assert!(c.compile().unwrap_err().contains("key"));
    c.key = "/auftragId".into();
    c.ttl = Some("soon".into());
    assert!(c.compile().unwrap_err().contains("ttl"));
    c.ttl = None;
    c.message_id = "attribute:".into();
    assert!(c.compile().unwrap_err().contains("message_id"));
}

#[test]
fn ack_only_for_recorded_outcomes() {
    let d = |outcome| Delivery {
        outcome,
        message_id: "m".into(),
        instance: None,
        element: None,
        reason: None,
        candidates: vec![],
        candidate_elements: vec![],
        expires_at: None,
    };
    for o in [
        Outcome::Correlated,
        Outcome::Buffered,
        Outcome::Duplicate,
        Outcome::Parked,
    ] {
        assert_eq!(AckDecision::of(&Ok(d(o))), AckDecision::Ack);
    }
    assert_eq!(
        AckDecision::of(&Ok(d(Outcome::Rejected))),
        AckDecision::Nack
    );
    let err = Err(crate::Error::Store(crate::store::StoreError::Closed));
    assert_eq!(AckDecision::of(&err), AckDecision::Nack);
}

#[test]
fn streams_and_flow_control_are_range_checked() {
    let base = || SubscriptionConfig::new("s", "M", "/k");
    assert_eq!(base().streams, DEFAULT_STREAMS);
    for bad in [0, MAX_STREAMS + 1] {
        let mut c = base();
        c.streams = bad;
        let e = c.compile().unwrap_err();
        assert!(
            e.contains("subscription 's': streams") && e.contains("1–32"),
            "{e}"
        );
    }
    let mut c = base();
    c.streams = MAX_STREAMS;
    assert!(c.compile().is_ok());
    let mut c = base();
    c.max_outstanding_messages = 0;
    assert!(
        c.compile()
            .unwrap_err()
            .contains("max_outstanding_messages")
    );
    let mut c = base();
    c.max_outstanding_bytes = -5;
    assert!(c.compile().unwrap_err().contains("max_outstanding_bytes"));
}

#[test]
fn a_consumer_of_several_streams_fails_while_any_stream_fails() {
    let s = ConsumerStats::with_streams("s", 3);
    assert_eq!((s.streams(), s.state()), (3, ConsumerState::Starting));
    s.set_stream_state(0, ConsumerState::Running, None);
    s.set_stream_state(1, ConsumerState::Running, None);
    assert_eq!(
        s.state(),
        ConsumerState::Starting,
        "one stream still connects"
    );
    s.set_stream_state(2, ConsumerState::Failing, Some("unavailable".into()));
    assert_eq!(s.state(), ConsumerState::Failing);
    assert_eq!(s.streams_running(), 2);
    // another stream recovering does not hide the failing one's error
    s.set_stream_state(0, ConsumerState::Running, None);
    assert_eq!(s.last_error().as_deref(), Some("unavailable"));
    s.set_stream_state(2, ConsumerState::Running, None);
    assert_eq!((s.state(), s.last_error()), (ConsumerState::Running, None));
    s.set_stream_state(9, ConsumerState::Failing, Some("ignored".into()));
    assert_eq!(s.state(), ConsumerState::Running, "out of range is ignored");
    s.set_stream_state(0, ConsumerState::Stopped, None);
    assert_eq!(s.state(), ConsumerState::Running, "the others still run");
    s.set_state(ConsumerState::Stopped, None);
    assert_eq!(s.state(), ConsumerState::Stopped);
}

fn claim_checked(claim: &str, variable: Option<&str>) -> Decoder {
    let mut c = SubscriptionConfig::new("s", "AuftragAbgeschlossen", "/auftragId");
    c.claim_check = Some(claim.into());
    c.claim_check_variable = variable.map(str::to_string);
    c.compile().unwrap()
}

fn publish(d: Decoded) -> Publish {
    match d {
        Decoded::Publish(p) => p,
        Decoded::Malformed(m) => panic!("malformed: {}", m.error),
    }
}

fn malformed(d: Decoded) -> String {
    match d {
        Decoded::Publish(p) => panic!("decoded: {p:?}"),
        Decoded::Malformed(m) => m.error,
    }
}

#[test]
fn a_claim_check_reference_becomes_a_typed_variable() {
    // Cloud Storage notification attributes
    let p = publish(claim_checked("attributes", None).decode(&incoming(
        r#"{"auftragId": "A-1", "name": "A-1/protokoll.json"}"#,
        &[
            ("bucketId", "abschluss-protokolle"),
            ("objectId", "A-1/protokoll.json"),
            ("objectGeneration", "1733220000123456"),
        ],
    )));
    assert_eq!(p.key, "A-1");
    assert_eq!(
        p.variables["claimCheck"],
        serde_json::json!({"bucket": "abschluss-protokolle", "object": "A-1/protokoll.json", "generation": "1733220000123456"})
    );
    // a gs:// URI in the payload, into a named variable
    let p = publish(
        claim_checked("/protokoll", Some("protokoll")).decode(&incoming(
            r#"{"auftragId": "A-2", "protokoll": "gs://abschluss/A-2/p.json#42"}"#,
            &[],
        )),
    );
    assert_eq!(
        p.variables["protokoll"],
        serde_json::json!({"bucket": "abschluss", "object": "A-2/p.json", "generation": "42"})
    );
    let p = publish(claim_checked("/ref", None).decode(&incoming(
        r#"{"auftragId": "A-3", "ref": "gs://abschluss/a/b/c.json"}"#,
        &[],
    )));
    assert_eq!(
        p.variables["claimCheck"]["generation"],
        serde_json::Value::Null
    );
    assert_eq!(p.variables["claimCheck"]["object"], "a/b/c.json");
}

#[test]
fn a_declared_claim_check_without_a_valid_reference_is_malformed() {
    let uri = |u: &str| {
        malformed(claim_checked("/ref", None).decode(&incoming(
            &format!(r#"{{"auftragId": "A-1", "ref": {u}}}"#),
            &[],
        )))
    };
    assert!(uri(r#""https://x/y""#).contains("claim-check reference: /ref: is not a gs://"));
    assert!(uri(r#""gs://bucket-only""#).contains("no object name"));
    assert!(uri(r#""gs://Gross/x""#).contains("bucket 'Gross'"));
    assert!(uri(r#""gs://ab/x""#).contains("bucket 'ab'"), "too short");
    assert!(uri(r#""gs://abc/x#zwei""#).contains("generation 'zwei'"));
    assert!(uri(r#""gs://abc/x#-1""#).contains("generation '-1'"));
    assert!(uri("17").contains("/ref is a number, not a gs:// URI"));
    let long = format!(r#""gs://abc/{}""#, "o".repeat(1025));
    assert!(uri(&long).contains("object name of 1025 bytes"));
    let missing =
        malformed(claim_checked("/ref", None).decode(&incoming(r#"{"auftragId": "A-1"}"#, &[])));
    assert!(missing.contains("/ref is missing"), "{missing}");
    let no_attrs = malformed(
        claim_checked("attributes", None)
            .decode(&incoming(r#"{"auftragId": "A-1"}"#, &[("bucketId", "abc")])),
    );
    assert!(no_attrs.contains("bucketId and objectId"), "{no_attrs}");
}

#[test]
fn an_optional_claim_check_lets_whole_messages_through_but_not_broken_references() {
    let optional = |claim: &str| {
        let mut c = SubscriptionConfig::new("s", "M", "/auftragId");
        c.claim_check = Some(claim.into());
        c.claim_check_required = false;
        c.compile().unwrap()
    };
    let whole = publish(optional("/ref").decode(&incoming(
        r#"{"auftragId": "A-1", "positionen": [1, 2]}"#,
        &[],
    )));
    assert!(!whole.variables.contains_key("claimCheck"));
    assert_eq!(whole.variables["positionen"], serde_json::json!([1, 2]));
    let whole = publish(optional("attributes").decode(&incoming(r#"{"auftragId": "A-1"}"#, &[])));
    assert!(!whole.variables.contains_key("claimCheck"));
    // a reference that is there must be valid, required or not
    let broken = malformed(optional("/ref").decode(&incoming(
        r#"{"auftragId": "A-1", "ref": "https://x/y"}"#,
        &[],
    )));
    assert!(broken.contains("is not a gs://"), "{broken}");
    let half = malformed(
        optional("attributes").decode(&incoming(r#"{"auftragId": "A-1"}"#, &[("objectId", "o")])),
    );
    assert!(half.contains("come together"), "{half}");
}

#[test]
fn claim_check_settings_are_checked() {
    let mut c = SubscriptionConfig::new("s", "M", "/k");
    c.claim_check = Some("bucket".into());
    let e = c.compile().unwrap_err();
    assert!(e.contains("claim_check") && e.contains("'bucket'"), "{e}");
    c.claim_check = Some("attributes".into());
    c.claim_check_variable = Some(" ".into());
    assert!(c.compile().unwrap_err().contains("claim_check_variable"));
}
