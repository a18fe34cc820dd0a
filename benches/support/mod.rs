//! Shared by the benchmarks: a 2-thread runtime and a database directory on the
//! project's disk (never a tmpfs, so every fsync is real).
#![allow(dead_code)]

pub fn rt() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .unwrap()
}

pub fn bench_dir() -> tempfile::TempDir {
    std::fs::create_dir_all("target/bench-db").unwrap();
    tempfile::tempdir_in("target/bench-db").unwrap()
}
