//! A profile's timed parts (outage schedules, phases) and `--watch`: reloading the profile file
//! while the proxies run.
//!
//! Why: a scenario is edited while a system is under test; restarting the proxy would drop every
//! connection and the very streams being observed. Invariants: a reload applies only a valid
//! profile whose `[[proxy]]` tables are unchanged (anything else is reported with its
//! `file:line:col` and the profile in force stays); it never closes a connection: each proxy's
//! fault chain is replaced (new connections use it, live ones within their next two chunks) and
//! the outage and phase timelines restart from the reload.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::time::Instant;
use tokio_util::sync::CancellationToken;

use crate::profile::Profile;
use crate::proxy::Proxy;
use crate::proxy::schedule::{drive_outages, drive_phases};

/// How often the watched file's modification time and size are looked at.
pub const POLL: Duration = Duration::from_millis(200);

/// A running proxy and the `[[proxy]]` name it has in the profile (`None`: the command line's).
#[derive(Clone)]
pub struct Watched {
    /// The profile's name of the proxy.
    pub name: Option<String>,
    /// The proxy.
    pub proxy: Arc<Proxy>,
}

/// Starts the outage schedules and phase timelines of `profile` for `proxies`, measured from
/// `start`, until `token` fires.
pub fn start_schedules(
    profile: &Profile,
    proxies: &[Watched],
    start: Instant,
    token: &CancellationToken,
) {
    for w in proxies {
        let outages = profile.outages_for(w.name.as_deref());
        if !outages.is_empty() {
            tokio::spawn(drive_outages(
                w.proxy.clone(),
                outages,
                start,
                token.clone(),
            ));
        }
        let steps = profile.phase_plan(w.name.as_deref());
        if !steps.is_empty() {
            tokio::spawn(drive_phases(w.proxy.clone(), steps, start, token.clone()));
        }
    }
}

fn stamp(path: &std::path::Path) -> Option<(SystemTime, u64)> {
    let m = std::fs::metadata(path).ok()?;
    Some((m.modified().ok()?, m.len()))
}

/// Watches `path` until `shutdown`: each change is loaded and, if valid and its proxies are
/// unchanged, applied (see the module doc). `schedules` is the token of the timelines now
/// running; `current` the profile in force.
pub async fn watch(
    path: PathBuf,
    mut current: Profile,
    proxies: Vec<Watched>,
    mut schedules: CancellationToken,
    shutdown: CancellationToken,
) {
    let shown = path.display().to_string();
    let mut seen = stamp(&path);
    let mut tick = tokio::time::interval(POLL);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        let now = stamp(&path);
        if now == seen {
            continue;
        }
        seen = now;
        let new = match crate::profile::load(&path) {
            Ok(p) => p,
            Err(e) => {
                eprintln!("tearline proxy: {e}; the profile in force is unchanged");
                continue;
            }
        };
        if new.proxies != current.proxies {
            eprintln!(
                "tearline proxy: {shown}: the [[proxy]] tables changed; --watch reloads faults, phases and outages only (restart to change proxies); the profile in force is unchanged"
            );
            continue;
        }
        schedules.cancel();
        schedules = shutdown.child_token();
        for w in &proxies {
            // A reload also brings back a profile the API's `/reset` detached.
            w.proxy.attach_profile(new.factories_for(w.name.as_deref()));
        }
        start_schedules(&new, &proxies, Instant::now(), &schedules);
        println!(
            "tearline proxy: reloaded {shown} ({} faults, {} phases)",
            new.faults.len(),
            new.phases.len()
        );
        current = new;
    }
}
