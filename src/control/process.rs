//! The process metrics a Prometheus client library exports for its process (the names of
//! client_golang's process collector, which Toxiproxy's `-runtime-metrics` serves), read from
//! `/proc/self` on Linux. Elsewhere, or when a file cannot be read, a metric is left out.
//!
//! Invariant: reading them allocates a little and takes a few system calls per scrape; nothing
//! on the data path.

/// One process metric: name, type, help, value.
pub type ProcessMetric = (&'static str, &'static str, &'static str, f64);

/// The process metrics available now.
pub fn read() -> Vec<ProcessMetric> {
    let mut out = Vec::new();
    let stat = std::fs::read_to_string("/proc/self/stat").ok();
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let fields: Vec<&str> = stat
        .as_deref()
        .and_then(|s| s.rsplit_once(')'))
        .map(|(_, rest)| rest.split_whitespace().collect())
        .unwrap_or_default();
    // 1-based field numbers of proc(5) minus 3 (pid, comm and state come before `rest`).
    let field = |n: usize| fields.get(n - 3).and_then(|v| v.parse::<f64>().ok());
    let ticks = 100.0; // USER_HZ on every Linux platform Rust targets.
    let page = 4096.0;
    if let (Some(u), Some(s)) = (field(14), field(15)) {
        out.push((
            "process_cpu_seconds_total",
            "counter",
            "Total user and system CPU time spent in seconds.",
            (u + s) / ticks,
        ));
    }
    if let Ok(dir) = std::fs::read_dir("/proc/self/fd") {
        out.push((
            "process_open_fds",
            "gauge",
            "Number of open file descriptors.",
            dir.count() as f64,
        ));
    }
    if let Some(max) = crate::proxy::fd_limit::soft_limit() {
        out.push((
            "process_max_fds",
            "gauge",
            "Maximum number of open file descriptors.",
            max as f64,
        ));
    }
    if let Some(v) = field(23) {
        out.push((
            "process_virtual_memory_bytes",
            "gauge",
            "Virtual memory size in bytes.",
            v,
        ));
    }
    if let Some(rss) = field(24) {
        out.push((
            "process_resident_memory_bytes",
            "gauge",
            "Resident memory size in bytes.",
            rss * page,
        ));
    }
    let boot = std::fs::read_to_string("/proc/stat").ok().and_then(|s| {
        s.lines()
            .find_map(|l| l.strip_prefix("btime "))
            .and_then(|v| v.trim().parse::<f64>().ok())
    });
    if let (Some(boot), Some(start)) = (boot, field(22)) {
        out.push((
            "process_start_time_seconds",
            "gauge",
            "Start time of the process since unix epoch in seconds.",
            boot + start / ticks,
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    #[test]
    #[cfg(target_os = "linux")]
    fn linux_gives_every_process_metric() {
        let names: Vec<&str> = super::read().iter().map(|m| m.0).collect();
        for want in [
            "process_cpu_seconds_total",
            "process_open_fds",
            "process_max_fds",
            "process_virtual_memory_bytes",
            "process_resident_memory_bytes",
            "process_start_time_seconds",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
    }
}
