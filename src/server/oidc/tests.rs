//! The verifier against tokens signed here with the keys of
//! `tests/fixtures/oidc`, on a manual clock.

use super::*;
use crate::clock::ManualClock;
use crate::server::auth::Role;
use jsonwebtoken::jwk::Jwk;
use jsonwebtoken::{EncodingKey, Header};
use serde_json::json;

const ISS: &str = "https://id.example/realms/shop";
const NOW: Millis = 1_800_000_000_000;

fn pem(name: &str) -> Vec<u8> {
    std::fs::read(format!(
        "{}/tests/fixtures/oidc/{name}",
        env!("CARGO_MANIFEST_DIR")
    ))
    .unwrap()
}

fn signing(name: &str, alg: Algorithm) -> EncodingKey {
    let p = pem(name);
    match alg {
        Algorithm::ES256 => EncodingKey::from_ec_pem(&p),
        Algorithm::EdDSA => EncodingKey::from_ed_pem(&p),
        _ => EncodingKey::from_rsa_pem(&p),
    }
    .unwrap()
}

fn public(name: &str, alg: Algorithm, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(&signing(name, alg), alg).unwrap();
    jwk.common.key_id = Some(kid.into());
    jwk
}

fn write_set(path: &std::path::Path, keys: Vec<Jwk>) {
    std::fs::write(path, serde_json::to_string(&JwkSet { keys }).unwrap()).unwrap();
}

fn claims(clock: Millis) -> serde_json::Value {
    json!({
        "iss": ISS, "aud": ["account", "postfach"], "sub": "f81d4fae",
        "preferred_username": "anna",
        "exp": clock / 1000 + 300, "iat": clock / 1000,
        "roles": ["worker:rechnungStellen", "offline_access", "reader"],
        "groups": ["/einkauf", "versand"],
    })
}

fn sign(name: &str, alg: Algorithm, kid: &str, claims: &serde_json::Value) -> String {
    let mut h = Header::new(alg);
    h.kid = Some(kid.into());
    jsonwebtoken::encode(&h, claims, &signing(name, alg)).unwrap()
}

struct Fixture {
    issuer: Issuer,
    clock: Arc<ManualClock>,
    set: std::path::PathBuf,
    _dir: tempfile::TempDir,
}

fn fixture(keys: Vec<Jwk>) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let set = dir.path().join("jwks.json");
    write_set(&set, keys);
    let clock = ManualClock::new(NOW);
    let (issuer, unreached) = Issuer::open(
        IssuerConfig {
            issuer: ISS.into(),
            audience: "postfach".into(),
            jwks_file: Some(set.clone()),
            roles_claim: "roles".into(),
            groups_claim: "groups".into(),
            console_client: None,
        },
        clock.clone(),
    )
    .unwrap();
    assert_eq!(unreached, None);
    Fixture {
        issuer,
        clock,
        set,
        _dir: dir,
    }
}

fn b64(v: &serde_json::Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
}

#[tokio::test]
async fn tokens_of_each_asymmetric_kind_verify_and_name_their_holder() {
    let f = fixture(vec![
        public("rsa-1.pem", Algorithm::RS256, "r1"),
        public("ec.pem", Algorithm::ES256, "e1"),
        public("ed25519.pem", Algorithm::EdDSA, "d1"),
    ]);
    for (file, alg, kid) in [
        ("rsa-1.pem", Algorithm::RS256, "r1"),
        ("ec.pem", Algorithm::ES256, "e1"),
        ("ed25519.pem", Algorithm::EdDSA, "d1"),
    ] {
        let id = f
            .issuer
            .verify(&sign(file, alg, kid, &claims(NOW)))
            .await
            .unwrap_or_else(|e| panic!("{alg:?}: {e}"));
        assert_eq!(id.name, "anna");
        assert_eq!(
            id.roles,
            [
                Grant {
                    role: Role::Worker,
                    scope: Some("rechnungStellen".into())
                },
                Grant {
                    role: Role::Reader,
                    scope: None
                }
            ],
            "offline_access is no postfach role and is left out"
        );
        assert_eq!(id.groups, ["einkauf", "versand"]);
    }
}

#[tokio::test]
async fn every_attack_of_the_list_is_refused() {
    let f = fixture(vec![public("rsa-1.pem", Algorithm::RS256, "r1")]);
    let good = claims(NOW);
    let with = |k: &str, v: serde_json::Value| {
        let mut c = good.clone();
        c[k] = v;
        c
    };
    let rs = |c: &serde_json::Value| sign("rsa-1.pem", Algorithm::RS256, "r1", c);
    // alg none: a header that says so and no signature
    let none = format!(
        "{}.{}.",
        b64(&json!({"alg": "none", "kid": "r1"})),
        b64(&good)
    );
    // HS256 with the issuer's public key as the shared secret
    let mut hs = Header::new(Algorithm::HS256);
    hs.kid = Some("r1".into());
    let confused =
        jsonwebtoken::encode(&hs, &good, &EncodingKey::from_secret(&pem("rsa-1.pub.pem"))).unwrap();
    // a payload changed after signing: roles raised to admin
    let signed = rs(&good);
    let parts: Vec<&str> = signed.split('.').collect();
    let tampered = format!(
        "{}.{}.{}",
        parts[0],
        b64(&with("roles", json!(["admin"]))),
        parts[2]
    );
    type Case = (&'static str, String, fn(&Refused) -> bool);
    let cases: Vec<Case> = vec![
        (
            "alg none",
            none,
            |e| matches!(e, Refused::Algorithm(a) if a == "none"),
        ),
        (
            "HS256 over the public key",
            confused,
            |e| matches!(e, Refused::Algorithm(a) if a == "HS256"),
        ),
        ("tampered payload", tampered, |e| {
            matches!(e, Refused::Invalid(_))
        }),
        (
            "expired beyond the leeway",
            rs(&with("exp", json!(NOW / 1000 - 31))),
            |e| matches!(e, Refused::Expired(_)),
        ),
        (
            "not yet valid",
            rs(&with("nbf", json!(NOW / 1000 + 60))),
            |e| matches!(e, Refused::NotYet(_)),
        ),
        ("wrong audience", rs(&with("aud", json!("billing"))), |e| {
            matches!(e, Refused::Invalid(_))
        }),
        (
            "wrong issuer",
            rs(&with("iss", json!("https://evil.example"))),
            |e| matches!(e, Refused::Invalid(_)),
        ),
        ("no exp", rs(&with("exp", json!(null))), |e| {
            matches!(e, Refused::Invalid(_))
        }),
        (
            "unknown kid",
            sign("rsa-2.pem", Algorithm::RS256, "r2", &good),
            |e| matches!(e, Refused::UnknownKey(k) if k == "r2"),
        ),
        (
            "a known kid, another key",
            sign("rsa-2.pem", Algorithm::RS256, "r1", &good),
            |e| matches!(e, Refused::Invalid(_)),
        ),
        ("not a JWT", "a.b".into(), |e| {
            matches!(e, Refused::Malformed(_))
        }),
    ];
    for (what, token, expected) in cases {
        let got = f.issuer.verify(&token).await;
        match got {
            Err(e) => assert!(expected(&e), "{what}: refused, but as {e:?}"),
            Ok(id) => panic!("{what}: accepted as {id:?}"),
        }
    }
    // within the leeway a clock a little behind the issuer's still accepts
    let late = with("exp", json!(NOW / 1000 - 20));
    assert!(f.issuer.verify(&rs(&late)).await.is_ok());
}

#[tokio::test]
async fn a_rotated_in_key_is_fetched_once_and_a_removed_key_stops_working() {
    let f = fixture(vec![public("rsa-1.pem", Algorithm::RS256, "r1")]);
    let old = sign("rsa-1.pem", Algorithm::RS256, "r1", &claims(NOW));
    assert!(f.issuer.verify(&old).await.is_ok());
    assert_eq!(f.issuer.fetches(), 1);
    // the issuer rotates: r2 in, r1 out
    write_set(&f.set, vec![public("rsa-2.pem", Algorithm::RS256, "r2")]);
    let new = sign("rsa-2.pem", Algorithm::RS256, "r2", &claims(NOW));
    assert!(f.issuer.verify(&new).await.is_ok(), "r2 fetched on sight");
    assert_eq!(f.issuer.fetches(), 2);
    let refused = f.issuer.verify(&old).await.unwrap_err();
    assert_eq!(refused, Refused::UnknownKey("r1".into()));
    // forged kids within REFETCH_EVERY cause no fetch
    for i in 0..20 {
        let forged = sign(
            "rsa-1.pem",
            Algorithm::RS256,
            &format!("x{i}"),
            &claims(NOW),
        );
        assert!(f.issuer.verify(&forged).await.is_err());
    }
    assert_eq!(f.issuer.fetches(), 2, "rate-limited");
    f.clock
        .advance(std::time::Duration::from_millis(REFETCH_EVERY));
    assert!(f.issuer.verify(&old).await.is_err());
    assert_eq!(f.issuer.fetches(), 3, "one fetch after the pause");
}

#[tokio::test]
async fn an_old_key_set_is_read_again_so_a_key_removed_quietly_stops_working() {
    let f = fixture(vec![
        public("rsa-1.pem", Algorithm::RS256, "r1"),
        public("rsa-2.pem", Algorithm::RS256, "r2"),
    ]);
    let later = NOW + MAX_AGE;
    let token = sign("rsa-1.pem", Algorithm::RS256, "r1", &claims(later));
    assert!(f.issuer.verify(&token).await.is_ok());
    write_set(&f.set, vec![public("rsa-2.pem", Algorithm::RS256, "r2")]);
    assert!(f.issuer.verify(&token).await.is_ok(), "still cached");
    f.clock.set(later);
    assert_eq!(
        f.issuer.verify(&token).await.unwrap_err(),
        Refused::UnknownKey("r1".into())
    );
}

#[test]
fn roles_come_from_a_list_a_scope_string_or_a_dotted_path() {
    let mut c = IssuerConfig {
        issuer: ISS.into(),
        audience: "postfach".into(),
        jwks_file: None,
        roles_claim: "scope".into(),
        groups_claim: "groups".into(),
        console_client: None,
    };
    let claims = json!({
        "client_id": "shop-backend",
        "scope": "profile starter:auftrag-ausfuehrung email",
        "realm_access": {"roles": ["operator", "default-roles-shop"]},
    });
    let id = identity(&c, &claims).unwrap();
    assert_eq!(id.name, "shop-backend");
    assert_eq!(id.roles[0].role, Role::Starter);
    assert_eq!(id.roles[0].scope.as_deref(), Some("auftrag-ausfuehrung"));
    c.roles_claim = "realm_access.roles".into();
    let id = identity(&c, &claims).unwrap();
    assert_eq!(
        id.roles.iter().map(|g| g.role).collect::<Vec<_>>(),
        [Role::Operator]
    );
    assert!(id.groups.is_empty());
    assert_eq!(identity(&c, &json!({"roles": ["admin"], "sub": " "})), None);
}

#[test]
fn an_issuer_over_plain_http_is_refused_unless_on_this_host() {
    let c = |issuer: &str| IssuerConfig {
        issuer: issuer.into(),
        audience: "postfach".into(),
        jwks_file: None,
        roles_claim: "roles".into(),
        groups_claim: "groups".into(),
        console_client: None,
    };
    assert!(c("https://id.example/realms/shop").check().is_ok());
    assert!(c("http://127.0.0.1:8080/realms/shop").check().is_ok());
    assert!(c("http://localhost:8080/realms/shop").check().is_ok());
    assert!(c("http://[::1]:8080/realms/shop").check().is_ok());
    let e = c("http://id.example/realms/shop").check().unwrap_err();
    assert!(e.contains("use https"), "{e}");
    let e = c("id.example").check().unwrap_err();
    assert!(e.contains("not an https:// URL"), "{e}");
    let mut empty = c("https://id.example");
    empty.audience.clear();
    assert!(empty.check().unwrap_err().contains("audience"));
}

#[tokio::test]
async fn a_remembered_token_still_expires_and_is_forgotten_with_its_key_set() {
    let f = fixture(vec![public("rsa-1.pem", Algorithm::RS256, "r1")]);
    let token = sign("rsa-1.pem", Algorithm::RS256, "r1", &claims(NOW));
    let first = f.issuer.caller_of(&token).await.unwrap();
    assert_eq!(&*first.name, "anna");
    assert_eq!(f.issuer.caller_of(&token).await.unwrap(), first);
    // a tampered copy is another token: verified, and refused
    let mut forged = token.clone();
    forged.pop();
    forged.push(if token.ends_with('A') { 'B' } else { 'A' });
    assert!(f.issuer.caller_of(&forged).await.is_err());
    // the issuer rotates r1 out: once the new set is read, the remembered
    // token is verified again, and refused
    write_set(&f.set, vec![public("rsa-2.pem", Algorithm::RS256, "r2")]);
    let new = sign("rsa-2.pem", Algorithm::RS256, "r2", &claims(NOW));
    assert!(f.issuer.caller_of(&new).await.is_ok());
    assert_eq!(
        f.issuer.caller_of(&token).await.unwrap_err(),
        Refused::UnknownKey("r1".into())
    );
    // a remembered token expires on the clock
    f.clock.set(NOW + 300_000 + LEEWAY + 1);
    assert!(matches!(
        f.issuer.caller_of(&new).await,
        Err(Refused::Expired(_))
    ));
}

#[test]
fn the_origin_of_an_issuer_is_its_scheme_host_and_port() {
    use super::origin;
    assert_eq!(
        origin("https://login.example/realms/shop/protocol/openid-connect/token"),
        Some("https://login.example")
    );
    assert_eq!(
        origin("http://127.0.0.1:8080/realms/shop"),
        Some("http://127.0.0.1:8080")
    );
    assert_eq!(
        origin("https://login.example"),
        Some("https://login.example")
    );
    assert_eq!(origin("https:///path"), None);
    assert_eq!(origin("ftp://x/"), None);
}
