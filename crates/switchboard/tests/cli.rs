//! The real binary's `config` subcommand and exit codes (no node is started).

use std::process::{Command, Output};

use switchboard::{load, Sources};

/// Runs `switchboard ARGS` with an empty environment plus `env`.
fn switchboard(args: &[&str], env: &[(&str, &str)]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args(args)
        .env_clear()
        .envs(env.iter().copied())
        .output()
        .expect("run the switchboard binary")
}

#[test]
fn printed_config_round_trips_through_the_loader() {
    let out = switchboard(
        &[
            "config",
            "--set",
            "session.max_sessions=7",
            "--node-id",
            "cli-1",
        ],
        &[("SWITCHBOARD_HTTP__ALLOWED_HOSTS", "a.example,b.example")],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8 TOML");
    let path = std::env::temp_dir().join(format!("sb-cli-{}.toml", std::process::id()));
    std::fs::write(&path, &printed).unwrap();
    let reloaded = load(&Sources {
        file: Some(path.clone()),
        ..Sources::default()
    });
    let _ = std::fs::remove_file(&path);
    let config = reloaded.unwrap_or_else(|e| panic!("{e}\n{printed}"));
    assert_eq!(config.session.max_sessions.get(), 7);
    assert_eq!(config.cluster.node_id, "cli-1");
    assert_eq!(config.http.allowed_hosts, ["a.example", "b.example"]);
    assert_eq!(config.to_toml(), printed);
    // The full resolved tree, as TOML sections.
    for section in [
        "[http]",
        "[transports.legacy_sse]",
        "[transports.websocket]",
        "[cluster]",
        "[redis]",
        "[session]",
        "[stateless]",
        "[stateless.mrtr]",
        "[stateless.tasks]",
        "[auth]",
        "[log]",
    ] {
        assert!(
            printed.contains(&format!("\n{section}\n")),
            "{section}:\n{printed}"
        );
    }
    assert!(
        printed.contains("\n[session]\nidle_ttl = \"30m\"\n"),
        "{printed}"
    );
}

#[test]
fn printed_config_hides_the_redis_passwords() {
    // Review of issue 14: `switchboard config` printed every password in plain text.
    let out = switchboard(
        &[
            "config",
            "--redis-url",
            "redis://app:urlsecret@127.0.0.1:6399/0",
        ],
        &[
            ("SWITCHBOARD_REDIS__MODE", "sentinel"),
            (
                "SWITCHBOARD_REDIS__NODES",
                "redis://:nodesecret@127.0.0.1:26379",
            ),
            ("SWITCHBOARD_REDIS__MASTER_NAME", "main"),
            ("SWITCHBOARD_REDIS__PASSWORD", "datasecret"),
            ("SWITCHBOARD_REDIS__SENTINEL_PASSWORD", "sentinelsecret"),
        ],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8 TOML");
    for secret in ["urlsecret", "nodesecret", "datasecret", "sentinelsecret"] {
        assert!(!printed.contains(secret), "{secret} printed:\n{printed}");
    }
    assert!(
        printed.starts_with("# Secrets are shown as \"***\""),
        "{printed}"
    );
    for line in [
        "url = \"redis://app:***@127.0.0.1:6399/0\"",
        "nodes = [\"redis://:***@127.0.0.1:26379\"]",
        "password = \"***\"",
        "sentinel_password = \"***\"",
        "master_name = \"main\"",
    ] {
        assert!(
            printed.contains(&format!("\n{line}\n")),
            "{line}:\n{printed}"
        );
    }
}

#[test]
fn printed_config_hides_auth_secrets_and_upstream_credentials() {
    // Issue 16: HS256 secrets, literal upstream credentials and URL passwords were printed.
    let file = r#"
[auth]
resource_url = "https://gw.example.test/mcp"
authorization_servers = ["https://as.example.test"]
jwt_hs256_secrets = ["hs256secret-0123456789abcdef0123456789"]
api_key_header = "X-API-Key"

[[auth.api_keys]]
sha256 = "9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08"
principal = "ci"

[[upstreams]]
name = "weather"
kind = "http"
url = "https://user:urlsecret@weather.example/mcp"
headers = { Authorization = "Bearer ${WEATHER_TOKEN}", X-Api-Key = "headersecret" }

[[upstreams]]
name = "files"
kind = "stdio"
command = "server"
env = { API_TOKEN = "envsecret", FROM_ENV = "${FILES_TOKEN}" }
"#;
    let path = std::env::temp_dir().join(format!("sb-cli-secrets-{}.toml", std::process::id()));
    std::fs::write(&path, file).unwrap();
    let out = switchboard(&["config", "--config", path.to_str().unwrap()], &[]);
    let _ = std::fs::remove_file(&path);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8 TOML");
    for secret in ["hs256secret", "urlsecret", "headersecret", "envsecret"] {
        assert!(!printed.contains(secret), "{secret} printed:\n{printed}");
    }
    assert!(printed.starts_with("# Secrets are shown as"), "{printed}");
    for shown in [
        "jwt_hs256_secrets = [\"***\"]",
        "sha256 = \"9f86d081884c7d659a2feaa0c55ad015a3bf4f1b2b0b822cd15d6c15b0f00a08\"",
        "url = \"https://user:***@weather.example/mcp\"",
        "Authorization = \"Bearer ${WEATHER_TOKEN}\"",
        "FROM_ENV = \"${FILES_TOKEN}\"",
    ] {
        assert!(printed.contains(shown), "{shown}:\n{printed}");
    }
}

#[test]
fn printed_config_hides_the_mrtr_state_keys() {
    // Break 16: the AES-256-GCM keys sealing `requestState` (which carries the principal) were
    // printed in plain text, so whoever read the output could forge states for any principal.
    let key = "c2VjcmV0LXNlYWxpbmcta2V5LTAxMjM0NTY3ODlhYmM=";
    let out = switchboard(
        &[
            "config",
            "--set",
            &format!("stateless.mrtr.state_keys=[\"{key}\"]"),
        ],
        &[],
    );
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let printed = String::from_utf8(out.stdout).expect("utf-8 TOML");
    assert!(!printed.contains(key), "state key printed:\n{printed}");
    assert!(printed.contains("\nstate_keys = [\"***\"]\n"), "{printed}");
}

#[test]
fn printed_config_keeps_an_unset_node_id_empty() {
    // Printing twice must not pin (or vary) a random id: it is picked only at serve time.
    let first = switchboard(&["config"], &[]);
    let second = switchboard(&["config"], &[]);
    assert!(first.status.success());
    let printed = String::from_utf8(first.stdout).expect("utf-8 TOML");
    assert!(printed.contains("\nnode_id = \"\"\n"), "{printed}");
    assert_eq!(printed.as_bytes(), second.stdout.as_slice());
}

#[test]
fn bad_config_exits_2_naming_the_key() {
    let out = switchboard(&["config"], &[("SWITCHBOARD_SESSION__IDLE_TTL", "soon")]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("session.idle_ttl"), "{stderr}");
    assert!(stderr.contains("SWITCHBOARD_SESSION__IDLE_TTL"), "{stderr}");

    let out = switchboard(&["serve", "--set", "session.max_sesions=1"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("unknown config key `session.max_sesions`"),
        "{stderr}"
    );
    assert!(
        stderr.contains("did you mean `session.max_sessions`"),
        "{stderr}"
    );

    let out = switchboard(&["serve", "--set", "max_sessions=1"], &[]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`max_sessions` moved to `session.max_sessions`"),
        "{stderr}"
    );
}

#[test]
fn unreachable_redis_exits_1() {
    // Port 1 on loopback refuses connections; the node must not start on the memory store instead.
    let out = switchboard(
        &[
            "serve",
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            "redis://127.0.0.1:1",
        ],
        &[],
    );
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("redis://127.0.0.1:1"), "{stderr}");
}

#[test]
fn sigterm_while_redis_does_not_answer_ends_the_node_at_once() {
    // Review of issue 14: a node still connecting to an unanswering Redis ignored SIGTERM until
    // the connect gave up. This "Redis" takes connections (the kernel's backlog) and never
    // answers.
    use std::io::{BufRead, BufReader};
    use std::time::{Duration, Instant};
    let silent = std::net::TcpListener::bind("127.0.0.1:0").expect("bind a silent port");
    let port = silent.local_addr().unwrap().port();
    let mut node = Command::new(env!("CARGO_BIN_EXE_switchboard"))
        .args([
            "--listen",
            "127.0.0.1:0",
            "--redis-url",
            &format!("redis://127.0.0.1:{port}/"),
        ])
        .env_clear()
        .env("RUST_LOG", "info")
        .stderr(std::process::Stdio::piped())
        .spawn()
        .expect("start the node");
    let mut lines = BufReader::new(node.stderr.take().unwrap()).lines();
    let connecting = lines
        .by_ref()
        .map_while(Result::ok)
        .find(|l| l.contains("connecting to Redis"));
    assert!(connecting.is_some(), "the node logs that it connects");
    let sent = Instant::now();
    let killed = Command::new("kill")
        .args(["-TERM", &node.id().to_string()])
        .status()
        .expect("run kill");
    assert!(killed.success());
    let (done, exited) = std::sync::mpsc::channel();
    let pid = node.id();
    std::thread::spawn(move || done.send(node.wait()));
    let Ok(status) = exited.recv_timeout(Duration::from_secs(3)) else {
        let _ = Command::new("kill")
            .args(["-KILL", &pid.to_string()])
            .status();
        panic!("the node still ran 3 s after SIGTERM");
    };
    let status = status.expect("wait for the node");
    println!("exited {:?} after SIGTERM", sent.elapsed());
    let rest: Vec<String> = lines.map_while(Result::ok).collect();
    assert!(status.success(), "{status}: {rest:?}");
    assert!(
        rest.iter()
            .any(|l| l.contains("stopped before the store was ready")),
        "{rest:?}"
    );
    drop(silent);
}
