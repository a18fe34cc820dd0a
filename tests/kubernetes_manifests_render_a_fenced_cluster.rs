//! `kubectl kustomize deploy/kubernetes` renders, and what it renders holds
//! the cluster's contract: a StatefulSet of partitions, each on its own
//! ReadWriteOncePod claim of a regional disk (never ReadWriteMany), ready on
//! `/health/ready`, with time for the graceful stop and a disruption budget of
//! one; a headless Service naming them; gateways that know every partition and
//! routers that count the same P.
use crate::common;

/// The rendered documents, each as (kind, text).
fn rendered() -> Vec<(String, String)> {
    let (program, args) = common::tools::kustomize();
    let out = std::process::Command::new(&program)
        .args(&args)
        .arg(concat!(env!("CARGO_MANIFEST_DIR"), "/deploy/kubernetes"))
        .output()
        .unwrap_or_else(|e| panic!("{}: {e}", program.display()));
    assert!(
        out.status.success(),
        "kustomize: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .split("\n---\n")
        .map(|doc| {
            let kind = doc
                .lines()
                .find_map(|l| l.strip_prefix("kind: "))
                .unwrap_or_else(|| panic!("a document without a kind:\n{doc}"))
                .trim()
                .to_string();
            (kind, doc.to_string())
        })
        .collect()
}

fn one<'a>(docs: &'a [(String, String)], kind: &str, name: &str) -> &'a str {
    let found: Vec<&str> = docs
        .iter()
        .filter(|(k, d)| k == kind && d.contains(&format!("\n  name: {name}\n")))
        .map(|(_, d)| d.as_str())
        .collect();
    assert_eq!(found.len(), 1, "one {kind} {name}: {found:?}");
    found[0]
}

/// The number after `key` in `doc` (`replicas: 4`, `--partitions=4`).
fn number_after(doc: &str, key: &str) -> u64 {
    let at = doc
        .find(key)
        .unwrap_or_else(|| panic!("no {key} in\n{doc}"))
        + key.len();
    doc[at..]
        .chars()
        .take_while(|c| c.is_ascii_digit())
        .collect::<String>()
        .parse()
        .unwrap_or_else(|_| panic!("no number after {key}"))
}

#[test]
fn kubernetes_manifests_render_a_fenced_cluster() {
    let docs = rendered();
    let partitions = one(&docs, "StatefulSet", "postfach");
    let p = number_after(partitions, "replicas: ");
    assert!(p >= 2, "a cluster of {p}");
    assert_eq!(number_after(partitions, "--partitions="), p);
    // the fence: one pod, one writer, on a disk that outlives a zone
    assert!(partitions.contains("ReadWriteOncePod"), "{partitions}");
    assert!(!partitions.contains("ReadWriteMany"), "{partitions}");
    assert!(partitions.contains("storageClassName: postfach-regional-pd"));
    let class = one(&docs, "StorageClass", "postfach-regional-pd");
    assert!(class.contains("replication-type: regional-pd"), "{class}");
    // ready when serving, time for the graceful stop, one down at a time
    assert!(partitions.contains("path: /health/ready"), "{partitions}");
    assert!(number_after(partitions, "terminationGracePeriodSeconds: ") >= 30);
    let pdb = one(&docs, "PodDisruptionBudget", "postfach-partitions");
    assert_eq!(number_after(pdb, "maxUnavailable: "), 1);
    let headless = one(&docs, "Service", "postfach-partitions");
    assert!(headless.contains("clusterIP: None"), "{headless}");
    // every partition's subscription is its own
    assert!(partitions.contains("auftrag-abgeschlossen-$(POD_INDEX)"));
    assert!(partitions.contains("apps.kubernetes.io/pod-index"));

    // the gateways and every partition (for thrown signals) know each
    // partition once; the routers count the same P
    let gateway = one(&docs, "Deployment", "postfach-gateway");
    for doc in [gateway, partitions] {
        for i in 0..p {
            let url = format!("--partition-url={i}=http://postfach-{i}.postfach-partitions:7820");
            assert_eq!(doc.matches(&url).count(), 1, "{url} in\n{doc}");
        }
        assert_eq!(doc.matches("--partition-url=").count() as u64, p);
    }
    let router = one(&docs, "Deployment", "postfach-router");
    assert_eq!(number_after(router, "--partitions="), p);
    assert!(router.contains("{partition}"), "{router}");
    one(&docs, "Service", "postfach");
}
