//! The config files of a Sentinel group: `redis.conf` of each data node and `sentinel.conf` of
//! each sentinel, written into the process's own dir. Both are files (not flags) because
//! Sentinel rewrites them: a sentinel records what it learnt (`CONFIG REWRITE` of its own
//! file), and after a failover it persists `replicaof` in the data nodes' files, so a restarted
//! process comes back as what Sentinel last made it.

use std::path::{Path, PathBuf};

use super::SentinelOptions;

/// Writes `<dir>/redis.conf` of a data node on `port` (a replica of 127.0.0.1:`primary` when
/// given) and returns its path. `repl-diskless-sync-delay 0`: the default 5 s delays the
/// replica's first full sync.
pub fn write_redis_conf(
    dir: &Path,
    port: u16,
    primary: Option<u16>,
    options: &SentinelOptions,
) -> PathBuf {
    let mut conf = format!(
        "port {port}\nbind 127.0.0.1\ndir {}\nsave \"\"\nappendonly {}\n\
         repl-diskless-sync-delay 0\n",
        dir.display(),
        if options.appendonly { "yes" } else { "no" },
    );
    if let Some(password) = &options.password {
        conf.push_str(&format!(
            "requirepass {}\nmasterauth {}\n",
            quoted(password),
            quoted(password)
        ));
    }
    if let Some(primary) = primary {
        conf.push_str(&format!("replicaof 127.0.0.1 {primary}\n"));
    }
    write(dir, "redis.conf", &conf)
}

/// Writes `<dir>/sentinel.conf` of a sentinel on `port` watching 127.0.0.1:`primary` (quorum 2)
/// and returns its path. With a sentinel password it sets `requirepass`, which a sentinel also
/// uses to authenticate to the other sentinels when no `sentinel sentinel-pass` is set.
pub fn write_sentinel_conf(
    dir: &Path,
    port: u16,
    primary: u16,
    options: &SentinelOptions,
) -> PathBuf {
    let name = &options.master_name;
    let mut conf = format!(
        "port {port}\nbind 127.0.0.1\ndir {}\n\
         sentinel monitor {name} 127.0.0.1 {primary} 2\n\
         sentinel down-after-milliseconds {name} {}\n\
         sentinel failover-timeout {name} {}\n\
         sentinel parallel-syncs {name} 1\n",
        dir.display(),
        options.down_after_ms,
        options.failover_timeout_ms,
    );
    if let Some(password) = &options.password {
        conf.push_str(&format!("sentinel auth-pass {name} {}\n", quoted(password)));
    }
    if let Some(password) = &options.sentinel_password {
        conf.push_str(&format!("requirepass {}\n", quoted(password)));
    }
    write(dir, "sentinel.conf", &conf)
}

/// A config argument in double quotes, `\` and `"` escaped (Redis's config syntax).
fn quoted(value: &str) -> String {
    format!("\"{}\"", value.replace('\\', "\\\\").replace('"', "\\\""))
}

fn write(dir: &Path, file: &str, text: &str) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap_or_else(|e| panic!("create {}: {e}", dir.display()));
    let path = dir.join(file);
    std::fs::write(&path, text).unwrap_or_else(|e| panic!("write {}: {e}", path.display()));
    path
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::temp::TempDir;

    #[test]
    fn configs_carry_the_passwords_and_the_monitor_line() {
        let dir = TempDir::new("sb-sentinel-conf");
        let options = SentinelOptions {
            password: Some("r\"p".into()),
            sentinel_password: Some("sp".into()),
            ..SentinelOptions::default()
        };
        let redis =
            std::fs::read_to_string(write_redis_conf(dir.path(), 7001, Some(7000), &options))
                .expect("read redis.conf");
        assert!(
            redis.contains("requirepass \"r\\\"p\"\nmasterauth \"r\\\"p\"\n"),
            "{redis}"
        );
        assert!(redis.contains("replicaof 127.0.0.1 7000\n"), "{redis}");
        let sentinel =
            std::fs::read_to_string(write_sentinel_conf(dir.path(), 7100, 7000, &options))
                .expect("read sentinel.conf");
        let name = &options.master_name;
        assert!(sentinel.contains(&format!("sentinel monitor {name} 127.0.0.1 7000 2\n")));
        assert!(sentinel.contains(&format!("sentinel down-after-milliseconds {name} 3000\n")));
        assert!(sentinel.contains(&format!("sentinel failover-timeout {name} 5000\n")));
        assert!(sentinel.contains(&format!("sentinel auth-pass {name} \"r\\\"p\"\n")));
        assert!(sentinel.contains("requirepass \"sp\"\n"), "{sentinel}");
    }
}
