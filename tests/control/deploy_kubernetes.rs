//! Every manifest under `deploy/kubernetes/` passes offline schema validation (PyPI
//! `kubernetes-validate`, pinned in tests/peers/requirements.lock, bundles the API schemas), the
//! profiles in the ConfigMap pass tearline's own profile validation, and the Job wiring the
//! multi-agent flow depends on is present. No cluster is reached.

use crate::common;
use std::path::{Path, PathBuf};
use std::process::Output;

/// Kubernetes version the manifests are validated against (native sidecars need 1.29+).
const KUBERNETES: &str = "1.30.0";

fn manifests() -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .expect("deploy/kubernetes exists")
        .map(|e| e.expect("entry").path())
        .filter(|p| p.extension().is_some_and(|e| e == "yaml" || e == "yml"))
        .collect();
    files.sort();
    files
}

fn validate(file: &Path) -> Output {
    common::peers::python()
        .args(["-m", "kubernetes_validate", "--strict", "-k", KUBERNETES])
        .arg(file)
        .output()
        .expect("python3 runs")
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

#[test]
fn every_manifest_passes_offline_schema_validation() {
    let files = manifests();
    assert!(
        files.len() >= 4,
        "the Job, merge Job, ConfigMap and volume: {files:?}"
    );
    for f in &files {
        let out = validate(f);
        assert!(
            out.status.success(),
            "{} is invalid:\n{}",
            f.display(),
            text(&out)
        );
    }
    // The validator rejects what the cluster would: a misspelt field under --strict.
    let tmp = tempfile::tempdir().expect("tempdir");
    let bad = tmp.path().join("bad.yaml");
    let job = std::fs::read_to_string(&files[0]).expect("manifest");
    std::fs::write(&bad, job.replace("completionMode:", "completionMod:")).expect("write");
    let out = validate(&bad);
    assert!(
        !out.status.success(),
        "a misspelt field must fail: {}",
        text(&out)
    );
}

#[test]
fn agents_job_maps_the_completion_index_to_a_segment_behind_a_loopback_proxy() {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("deploy/kubernetes");
    let job = std::fs::read_to_string(dir.join("agents-job.yaml")).expect("agents job");
    for needle in [
        "completionMode: Indexed",
        "--segment \"$((JOB_COMPLETION_INDEX + 1))/$SEGMENTS\"",
        "--api 127.0.0.1:8474",
        "--target http://127.0.0.1:8931/mcp",
        "restartPolicy: Always",
        "--report-dir \"/reports/agent-$((JOB_COMPLETION_INDEX + 1))\"",
    ] {
        assert!(job.contains(needle), "agents-job.yaml lacks {needle:?}");
    }
    let merge = std::fs::read_to_string(dir.join("merge-job.yaml")).expect("merge job");
    assert!(merge.contains("tearline report merge /reports/agent-*"));

    // The ConfigMap's profiles are valid tearline profiles.
    let tmp = tempfile::tempdir().expect("tempdir");
    let script = "import sys, yaml, pathlib\n\
        doc = yaml.safe_load(open(sys.argv[1]))\n\
        for name, text in doc['data'].items():\n\
        \x20   pathlib.Path(sys.argv[2], name).write_text(text)\n\
        print(len(doc['data']))\n";
    let out = common::peers::python()
        .args(["-c", script])
        .arg(dir.join("profiles-configmap.yaml"))
        .arg(tmp.path())
        .output()
        .expect("python3 runs");
    assert!(out.status.success(), "{}", text(&out));
    for entry in std::fs::read_dir(tmp.path()).expect("profiles") {
        let path = entry.expect("entry").path();
        let out = std::process::Command::new(env!("CARGO_BIN_EXE_tearline"))
            .args(["profiles", "validate"])
            .arg(&path)
            .output()
            .expect("tearline runs");
        assert!(out.status.success(), "{}: {}", path.display(), text(&out));
    }
}
