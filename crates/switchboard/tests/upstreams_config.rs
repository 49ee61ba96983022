//! `[[upstreams]]` and `tool_separator` through the real config loader: the worked example loads,
//! tables come from the file only, problems name the upstream and where it was set, and the
//! printed config reads back the same.

use std::path::{Path, PathBuf};

use switchboard::load::Override;
use switchboard::{load, Config, ConfigError, Sources};
use switchboard_upstream::config::UpstreamKind;

fn repo_file(path: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .join(path)
}

/// A config file in a fresh temporary directory (removed when the guard drops).
struct TempFile(PathBuf);

impl TempFile {
    fn new(text: &str) -> TempFile {
        let dir = std::env::temp_dir().join(format!(
            "sb-upstreams-{}-{:x}",
            std::process::id(),
            rand::random::<u64>()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("switchboard.toml");
        std::fs::write(&path, text).unwrap();
        TempFile(path)
    }
}

impl Drop for TempFile {
    fn drop(&mut self) {
        if let Some(dir) = self.0.parent() {
            let _ = std::fs::remove_dir_all(dir);
        }
    }
}

fn load_text(text: &str) -> Result<Config, ConfigError> {
    let file = TempFile::new(text);
    load(&Sources {
        file: Some(file.0.clone()),
        ..Sources::default()
    })
}

fn problems(text: &str) -> String {
    match load_text(text) {
        Ok(_) => panic!("should be refused:\n{text}"),
        Err(e) => e.to_string(),
    }
}

#[test]
fn the_worked_example_loads() {
    let config = load(&Sources {
        file: Some(repo_file("examples/upstreams.toml")),
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("examples/upstreams.toml: {e}"));
    assert_eq!(config.tool_separator, "__");
    let names: Vec<&str> = config.upstreams.iter().map(|u| u.name.as_str()).collect();
    assert_eq!(names, ["a", "b"]);
    assert!(config
        .upstreams
        .iter()
        .all(|u| u.kind == UpstreamKind::Demo));
    let upstream = switchboard_upstream::build::upstreams(&config.upstreams_config()).unwrap();
    assert_eq!(upstream.members().len(), 2);
    // Every field of a table is shown in the example, at least in a comment.
    let text = std::fs::read_to_string(repo_file("examples/upstreams.toml")).unwrap();
    for field in [
        "name",
        "kind",
        "prefix",
        "timeout_ms",
        "command",
        "args",
        "env",
        "cwd",
        "shared",
        "restart_backoff_ms",
        "restart_backoff_max_ms",
        "restart_stable_ms",
        "max_attached_sessions",
        "url",
        "headers",
        "stateless",
        "on_upstream_loss",
        "resolve_interval_ms",
        "nameservers",
        "max_endpoints",
        "max_cookie_bytes",
    ] {
        assert!(
            text.contains(&format!("{field} = ")),
            "example lacks `{field}`"
        );
    }
}

#[test]
fn no_upstreams_is_the_default_and_prints_no_tables() {
    let config = load(&Sources::default()).unwrap();
    assert!(config.upstreams.is_empty());
    assert!(!config.to_toml().contains("upstreams"));
    assert!(Config::keys().contains(&"tool_separator".to_owned()));
    assert!(!Config::keys().contains(&"upstreams".to_owned()));
}

#[test]
fn the_printed_config_reads_back_the_same() {
    let config = load_text(
        "tool_separator = \".\"\n[[upstreams]]\nname = \"a\"\nkind = \"demo\"\nprefix = \"\"\n\
         [[upstreams]]\nname = \"w\"\nkind = \"http\"\nurl = \"http://127.0.0.1:9/mcp\"\n\
         headers = { Authorization = \"Bearer ${TOKEN}\" }\n",
    )
    .unwrap();
    let again = load_text(&config.to_toml()).unwrap();
    assert_eq!(again, config);
    assert_eq!(
        again.upstreams[1].headers["Authorization"],
        "Bearer ${TOKEN}"
    );
}

/// Among them case C32's: a size limit of 0 (`max_line_bytes`, `max_message_bytes`) is refused
/// at load, naming the key.
#[test]
fn bad_tables_are_refused_naming_the_upstream_and_the_file() {
    let cases = [
        ("[[upstreams]]\nname = \"a\"\nkind = \"demo\"\nprefx = \"x\"\n", "prefx"),
        ("[[upstreams]]\nname = \"a\"\nkind = \"ftp\"\n", "ftp"),
        ("[[upstreams]]\nname = \"a b\"\nkind = \"demo\"\n", "upstream name `a b`"),
        ("[[upstreams]]\nname = \"s\"\nkind = \"stdio\"\n", "upstream `s`: kind `stdio` needs a `command`"),
        (
            "[[upstreams]]\nname = \"a\"\nkind = \"demo\"\n[[upstreams]]\nname = \"a\"\nkind = \"demo\"\n",
            "`a` is used twice",
        ),
        ("tool_separator = \"/\"\n", "tool separator `/`"),
        (
            "[[upstreams]]\nname = \"s\"\nkind = \"stdio\"\ncommand = \"x\"\nmax_line_bytes = 0\n",
            "upstream `s`: max_line_bytes must be greater than 0",
        ),
        (
            "[[upstreams]]\nname = \"w\"\nkind = \"sse\"\nurl = \"http://127.0.0.1:9/sse\"\nmax_message_bytes = 0\n",
            "upstream `w`: max_message_bytes must be greater than 0",
        ),
    ];
    for (text, needle) in cases {
        let message = problems(text);
        assert!(
            message.contains(needle),
            "{message}\nshould contain {needle:?}"
        );
        assert!(
            message.contains("switchboard.toml"),
            "names the file: {message}"
        );
    }
}

#[test]
fn upstreams_cannot_come_from_the_environment_or_flags() {
    let env = load(&Sources {
        env: vec![("SWITCHBOARD_UPSTREAMS".into(), "a,b".into())],
        ..Sources::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        env.contains("`upstreams` can only be set in the config file")
            && env.contains("SWITCHBOARD_UPSTREAMS"),
        "{env}"
    );
    let flag = load(&Sources {
        overrides: vec![Override {
            origin: "--set upstreams=[...]".into(),
            key: "upstreams".into(),
            raw: "[{name = \"a\", kind = \"demo\"}]".into(),
        }],
        ..Sources::default()
    })
    .unwrap_err()
    .to_string();
    assert!(
        flag.contains("can only be set in the config file"),
        "{flag}"
    );
    // The separator is a top-level key like any other.
    let sep = load(&Sources {
        env: vec![("SWITCHBOARD_TOOL_SEPARATOR".into(), "-".into())],
        ..Sources::default()
    })
    .unwrap();
    assert_eq!(sep.tool_separator, "-");
}

#[test]
fn the_stdio_and_http_example_loads_and_builds() {
    let config = load(&Sources {
        file: Some(repo_file("examples/stdio-and-http.toml")),
        ..Sources::default()
    })
    .unwrap_or_else(|e| panic!("examples/stdio-and-http.toml: {e}"));
    let kinds: Vec<(&str, UpstreamKind)> = config
        .upstreams
        .iter()
        .map(|u| (u.name.as_str(), u.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("local", UpstreamKind::Stdio),
            ("remote", UpstreamKind::Http)
        ]
    );
    let upstream = switchboard_upstream::build::upstreams(&config.upstreams_config()).unwrap();
    assert_eq!(upstream.members().len(), 2);
}
