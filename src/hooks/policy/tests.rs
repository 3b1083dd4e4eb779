//! Unit tests of the hook policy: its entries, the commands and URLs it allows, the addresses
//! it refuses under any policy, and the Secrets rule.

use super::*;

fn exec(rules: &[&str]) -> Policy {
    rules.iter().fold(Policy::restricted(), |p, r| {
        p.allow_exec(r.parse().unwrap())
    })
}

fn urls(rules: &[&str]) -> Policy {
    rules
        .iter()
        .fold(Policy::restricted(), |p, r| p.allow_url(r.parse().unwrap()))
}

fn command(program: &str) -> Vec<String> {
    vec![program.to_owned(), "arg".to_owned()]
}

#[test]
fn exec_entries_are_absolute_paths_or_directories_ending_in_a_slash() {
    assert_eq!(
        "/hooks/sync.py".parse::<ExecRule>(),
        Ok(ExecRule::Path("/hooks/sync.py".into()))
    );
    assert_eq!(
        "/hooks/".parse::<ExecRule>(),
        Ok(ExecRule::Under("/hooks/".into()))
    );
    for bad in [
        "hooks/sync.py",
        "python3",
        "/hooks/../bin/sh",
        "/hooks/./x",
        "//x",
        "",
    ] {
        let e = bad.parse::<ExecRule>().unwrap_err();
        assert!(e.to_string().contains("--hook-allow-exec"), "{e}");
    }
}

#[test]
fn a_restricted_policy_runs_only_the_listed_programs_named_by_absolute_path() {
    let policy = exec(&["/hooks/", "/usr/local/bin/sync"]);
    assert_eq!(policy.check_exec(&command("/hooks/cronjob.py")), Ok(()));
    assert_eq!(policy.check_exec(&command("/usr/local/bin/sync")), Ok(()));
    let e = policy.check_exec(&command("/usr/bin/curl")).unwrap_err();
    assert_eq!(
        e,
        "spec.hook.exec.command \"/usr/bin/curl\" is not in --hook-allow-exec"
    );
    for sneaky in [
        "/hooks/../usr/bin/curl",
        "/hooks//x",
        "/hooks/",
        "/usr/local/bin/sync2",
        "/hooksx/a",
    ] {
        assert!(policy.check_exec(&command(sneaky)).is_err(), "{sneaky}");
    }
    let e = policy.check_exec(&command("python3")).unwrap_err();
    assert!(e.contains("not an absolute path"), "{e}");
    assert!(
        Policy::restricted()
            .check_exec(&command("/bin/true"))
            .is_err()
    );
    assert_eq!(Policy::open().check_exec(&command("python3")), Ok(()));
}

#[test]
fn url_entries_are_hosts_hosts_with_a_port_addresses_or_cidr_blocks() {
    let host = |h: &str, p: Option<u16>| UrlRule::Host {
        host: h.into(),
        port: p,
    };
    assert_eq!("Hooks.Ops.svc".parse(), Ok(host("hooks.ops.svc", None)));
    assert_eq!(
        "hooks.ops.svc:8443".parse(),
        Ok(host("hooks.ops.svc", Some(8443)))
    );
    assert_eq!("10.1.2.3".parse(), Ok(host("10.1.2.3", None)));
    assert_eq!("[fd00::1]:443".parse(), Ok(host("fd00::1", Some(443))));
    assert_eq!("fd00::1".parse(), Ok(host("fd00::1", None)));
    assert!(matches!("10.0.0.0/8".parse(), Ok(UrlRule::Cidr(_))));
    for bad in [
        "10.0.0.0/33",
        "hooks:0",
        "hooks:x",
        "a b",
        "http://x",
        "",
        "x/8",
    ] {
        let e = bad.parse::<UrlRule>().unwrap_err();
        assert!(e.to_string().contains("--hook-allow-url"), "{bad}: {e}");
    }
}

#[test]
fn a_restricted_policy_calls_only_listed_hosts_and_plain_http_only_when_allowed() {
    let policy = urls(&["hooks.ops.svc:8443", "10.0.0.0/8", "fd00::1"]);
    assert_eq!(policy.check_url("https://hooks.ops.svc:8443/sync"), Ok(()));
    assert_eq!(policy.check_url("https://HOOKS.ops.svc:8443/"), Ok(()));
    assert_eq!(policy.check_url("https://10.9.8.7/"), Ok(()));
    assert_eq!(policy.check_url("https://[fd00::1]:9443/"), Ok(()));
    let e = policy.check_url("https://hooks.ops.svc/sync").unwrap_err();
    assert_eq!(
        e,
        "spec.hook.webhook.url host \"hooks.ops.svc:443\" is not in --hook-allow-url"
    );
    // A CIDR block admits addresses, not the names that may resolve into it.
    assert!(policy.check_url("https://other.ops.svc/").is_err());
    let e = policy.check_url("http://hooks.ops.svc:8443/").unwrap_err();
    assert!(e.contains("--hook-allow-http"), "{e}");
    let http = policy.clone().allow_http(true);
    assert_eq!(http.check_url("http://hooks.ops.svc:8443/"), Ok(()));
    assert!(
        Policy::restricted()
            .allow_http(true)
            .check_url("http://a/")
            .is_err()
    );
    assert!(policy.check_url("ftp://hooks.ops.svc:8443/").is_err());
}

#[test]
fn link_local_addresses_are_refused_under_any_policy_unless_named() {
    for url in [
        "http://169.254.169.254/latest/meta-data/",
        "http://[fe80::1]/",
        "http://[::ffff:169.254.169.254]/",
    ] {
        let e = Policy::open().check_url(url).unwrap_err();
        assert!(e.contains("is link-local"), "{url}: {e}");
    }
    let everything = urls(&["0.0.0.0/0"]).allow_http(true);
    assert!(everything.check_url("http://10.0.0.1/").is_ok());
    assert!(
        everything.check_url("http://169.254.169.254/").is_err(),
        "0.0.0.0/0 does not name the metadata service"
    );
    let named = urls(&["169.254.169.254"]).allow_http(true);
    assert_eq!(named.check_url("http://169.254.169.254/"), Ok(()));
    let block = urls(&["169.254.0.0/16"]).allow_http(true);
    assert_eq!(block.check_url("http://169.254.1.2/"), Ok(()));
    // Under an open policy an entry only names an exception.
    let open = Policy::open().allow_url("169.254.169.254".parse().unwrap());
    assert_eq!(open.check_url("http://169.254.169.254/"), Ok(()));
    assert_eq!(open.check_url("http://anything.example/"), Ok(()));
}

/// (URL host:port, what the refusal says) of the addresses refused under every policy; the
/// issue's six first.
const ALWAYS_REFUSED: [(&str, &str); 22] = [
    (
        "[::169.254.169.254]:80",
        "embeds 169.254.169.254 (IPv4-compatible), which is link-local (169.254.0.0/16)",
    ),
    (
        "[64:ff9b::a9fe:a9fe]:80",
        "embeds 169.254.169.254 (NAT64), which is link-local (169.254.0.0/16)",
    ),
    (
        "[2002:a9fe:a9fe::1]:80",
        "embeds 169.254.169.254 (6to4), which is link-local (169.254.0.0/16)",
    ),
    (
        "[fd00:ec2::254]:80",
        "is a cloud metadata service (fd00:ec2::254/128)",
    ),
    ("0.0.0.0:15000", "is unspecified (this host) (0.0.0.0/8)"),
    ("127.0.0.1:15000", "is loopback (127.0.0.0/8)"),
    ("127.1.2.3:80", "is loopback (127.0.0.0/8)"),
    ("[::1]:15000", "is loopback (::1/128)"),
    ("[::]:15000", "is unspecified (this host) (::/128)"),
    ("[::ffff:127.0.0.1]:15000", "is loopback (127.0.0.0/8)"),
    (
        "[::0.0.1.2]:80",
        "embeds 0.0.1.2 (IPv4-compatible), which is unspecified (this host)",
    ),
    (
        "[64:ff9b::7f00:1]:15000",
        "embeds 127.0.0.1 (NAT64), which is loopback",
    ),
    (
        "[2002:7f00:1::1]:15000",
        "embeds 127.0.0.1 (6to4), which is loopback",
    ),
    ("169.254.169.254:80", "is link-local (169.254.0.0/16)"),
    ("169.254.170.2:80", "is link-local (169.254.0.0/16)"),
    ("[fe80::1]:80", "is link-local (fe80::/10)"),
    (
        "[fd20:ce::254]:80",
        "is a cloud metadata service (fd20:ce::254/128)",
    ),
    (
        "100.100.100.200:80",
        "is a cloud metadata service (100.100.100.200/32)",
    ),
    // Teredo: the client's IPv4 address inverted (7f00:1 is 80ff:fffe).
    (
        "[2001:0:4136:e378:8000:63bf:80ff:fffe]:15000",
        "embeds 127.0.0.1 (Teredo), which is loopback",
    ),
    (
        "[2001:0:4136:e378:8000:63bf:5601:5601]:80",
        "embeds 169.254.169.254 (Teredo), which is link-local",
    ),
    (
        "[64:ff9b:1::a9fe:a9fe]:80",
        "is a NAT64 local-use prefix (its IPv4 address where the network put it) (64:ff9b:1::/48)",
    ),
    (
        "[64:ff9b:1:a9fe:a9:fe00::]:80",
        "is a NAT64 local-use prefix",
    ),
];

/// Issue 45, item 9: addresses that reach the node, a sidecar or a metadata service passed
/// under `--hook-allow-url 0.0.0.0/0,::/0`.
#[test]
fn the_always_refused_addresses_are_refused_under_every_policy_unless_named_exactly() {
    let refused = ALWAYS_REFUSED;
    let everything = urls(&["0.0.0.0/0", "::/0"]).allow_http(true);
    for policy in [&everything, &Policy::open()] {
        for (authority, why) in refused {
            let url = format!("http://{authority}/");
            let e = policy.check_url(&url).unwrap_err();
            assert!(e.contains(why), "{url}: {e}");
            assert!(
                e.ends_with("refused unless --hook-allow-url names it"),
                "{e}"
            );
            // The same address, reached through a name, is refused at connection.
            let address: SocketAddr = authority.parse().unwrap();
            let e = policy
                .check_address("sidecar.example", address)
                .unwrap_err();
            assert!(e.contains("(of sidecar.example)") && e.contains(why), "{e}");
            // Named exactly (the address as the URL writes it), it is allowed.
            let host = authority
                .rsplit_once(':')
                .unwrap()
                .0
                .trim_matches(['[', ']']);
            let named = policy.clone().allow_url(host.parse().unwrap());
            assert_eq!(named.check_url(&url), Ok(()), "{url} named by {host}");
            assert_eq!(named.check_address("sidecar.example", address), Ok(()));
        }
    }
    // Named on another port, or by a block wider than the refused one, it is not.
    let other_port = everything
        .clone()
        .allow_url("127.0.0.1:15001".parse().unwrap());
    assert!(other_port.check_url("http://127.0.0.1:15000/").is_err());
    let wide = everything
        .clone()
        .allow_url("64:ff9b::/96".parse().unwrap());
    assert!(wide.check_url("http://[64:ff9b::a9fe:a9fe]/").is_err());
    // Naming the embedded address or a block inside the refused one names it.
    let inner = everything.clone().allow_url("127.0.0.0/8".parse().unwrap());
    assert_eq!(inner.check_url("http://[64:ff9b::7f00:1]:15000/"), Ok(()));
    // What the embedded addresses carry elsewhere, and other addresses, pass.
    for fine in [
        "http://[64:ff9b::808:808]/",
        "http://[2002:808:808::1]/",
        "http://[2001:0:4136:e378:8000:63bf:f7f7:f7f7]/",
        "http://[::ffff:10.1.2.3]/",
        "http://[2001:db8::1]/",
        "http://[fd00:ec2::253]/",
        "http://10.0.0.1/",
        "http://100.100.100.201/",
        "http://1.0.0.0/",
    ] {
        assert_eq!(everything.check_url(fine), Ok(()), "{fine}");
        assert_eq!(Policy::open().check_url(fine), Ok(()), "{fine}");
    }
}

#[test]
fn a_name_that_resolves_to_a_refused_address_is_refused_at_connection() {
    let policy = urls(&["metadata.example"]).allow_http(true);
    assert_eq!(policy.check_url("http://metadata.example/"), Ok(()));
    let address: SocketAddr = "169.254.169.254:80".parse().unwrap();
    let e = policy
        .check_address("metadata.example", address)
        .unwrap_err();
    assert_eq!(
        e,
        "webhook address 169.254.169.254:80 (of metadata.example) is link-local \
         (169.254.0.0/16); refused unless --hook-allow-url names it"
    );
    let mapped: SocketAddr = "[::ffff:169.254.169.254]:80".parse().unwrap();
    assert!(policy.check_address("metadata.example", mapped).is_err());
    let fine: SocketAddr = "10.1.2.3:80".parse().unwrap();
    assert_eq!(policy.check_address("metadata.example", fine), Ok(()));
}

#[test]
fn the_api_servers_address_is_refused_unless_named_other_ports_of_its_host_are_not() {
    let policy = Policy::open().api_server("10.96.0.1", 443);
    let e = policy.check_url("https://10.96.0.1/api").unwrap_err();
    assert!(e.contains("is the API server's"), "{e}");
    assert_eq!(policy.check_url("http://10.96.0.1:8080/"), Ok(()));
    let by_name = Policy::open().api_server("Kubernetes.default.svc", 443);
    assert!(
        by_name
            .check_url("https://kubernetes.default.svc/")
            .is_err()
    );
    let resolved: SocketAddr = "10.96.0.1:443".parse().unwrap();
    assert!(
        by_name
            .check_resolved("kubernetes", resolved, &[resolved])
            .is_err()
    );
    let named = urls(&["10.96.0.1:443"]).api_server("10.96.0.1", 443);
    assert_eq!(named.check_url("https://10.96.0.1/"), Ok(()));
    let wide = urls(&["10.0.0.0/8"]).api_server("10.96.0.1", 443);
    assert!(
        wide.check_url("https://10.96.0.1/").is_err(),
        "a CIDR block wider than the address does not name it"
    );
}

fn settings(hook: Hook, owns: &[(&str, &str, &str)]) -> ControllerSettings {
    ControllerSettings {
        key: super::super::ControllerKey::new("ops", "c"),
        for_kind: GroupVersionKind::gvk("", "v1", "ConfigMap"),
        label_selector: None,
        field_selector: None,
        owns: owns
            .iter()
            .map(|(g, v, k)| GroupVersionKind::gvk(g, v, k))
            .collect(),
        watches: Vec::new(),
        map_to: Vec::new(),
        hook,
        concurrency: 1,
        resync_period: None,
        timeout: None,
        schedule: None,
        admission: Vec::new(),
        conversion: None,
        finalizer: None,
    }
}

#[test]
fn secrets_are_sent_to_hooks_only_when_allowed_and_every_broken_rule_is_named() {
    let hook = Hook::Exec {
        env: Vec::new(),
        command: command("/usr/bin/curl"),
        timeout: std::time::Duration::from_secs(1),
    };
    let s = settings(
        hook,
        &[("", "v1", "Secret"), ("example.com", "v1", "Secret")],
    );
    let refusal = Policy::restricted().refusal(&s).unwrap();
    assert_eq!(
        refusal,
        "spec.hook.exec.command \"/usr/bin/curl\" is not in --hook-allow-exec; spec.owns[0]: \
         v1 Secret objects are not sent to hooks unless the manager runs with \
         --hook-allow-secrets"
    );
    let allowed = exec(&["/usr/bin/curl"]).allow_secrets(true);
    assert_eq!(allowed.refusal(&s), None);
    assert_eq!(Policy::open().refusal(&s), None, "open sends Secrets");
}

#[test]
fn an_admission_hook_of_its_own_is_checked_by_the_policy_too() {
    let allowed = Hook::Exec {
        env: Vec::new(),
        command: command("/hooks/sync"),
        timeout: std::time::Duration::from_secs(1),
    };
    let mut s = settings(allowed.clone(), &[]);
    let policy = Policy::restricted().allow_exec("/hooks/".parse().unwrap());
    let admission = |hook: Hook| crate::hooks::AdmissionHook {
        name: "guard".to_owned(),
        type_: crate::hooks::AdmissionType::Validating,
        operations: vec!["CREATE".to_owned()],
        hook,
        failure_policy: crate::hooks::FailurePolicy::Fail,
        timeout: std::time::Duration::from_secs(10),
        namespace_selector: None,
        object_selector: None,
        match_conditions: Vec::new(),
    };
    s.admission = vec![admission(allowed)];
    assert_eq!(
        policy.refusal(&s),
        None,
        "the Controller's own hook, allowed"
    );
    s.admission = vec![admission(Hook::Exec {
        env: Vec::new(),
        command: command("/usr/bin/curl"),
        timeout: std::time::Duration::from_secs(1),
    })];
    let refusal = policy.refusal(&s).unwrap();
    assert!(
        refusal.starts_with("spec.admission[0].hook.exec.command \"/usr/bin/curl\""),
        "{refusal}"
    );
    assert!(refusal.contains("/usr/bin/curl"), "{refusal}");
}

#[test]
fn a_conversion_hook_of_its_own_is_checked_by_the_policy_too() {
    let allowed = Hook::Exec {
        env: Vec::new(),
        command: command("/hooks/sync"),
        timeout: std::time::Duration::from_secs(1),
    };
    let mut s = settings(allowed.clone(), &[]);
    let policy = Policy::restricted().allow_exec("/hooks/".parse().unwrap());
    let conversion = |hook: Hook| crate::hooks::ConversionHook {
        versions: vec!["v1alpha1".to_owned(), "v1".to_owned()],
        hub: None,
        hook,
    };
    s.conversion = Some(conversion(allowed));
    assert_eq!(policy.refusal(&s), None, "the Controller's own hook");
    s.conversion = Some(conversion(Hook::Webhook {
        url: "http://169.254.169.254/convert".to_owned(),
        timeout: std::time::Duration::from_secs(1),
        tls: None,
    }));
    let refusal = policy.refusal(&s).unwrap();
    assert!(
        refusal.starts_with("spec.conversion.hook.webhook.url"),
        "{refusal}"
    );
}

// The library's path, not only the CLI's: a Manager built with a restricted Policy refuses a
// client certificate Secret without allow_secrets, as `informant run` does.
#[test]
fn a_client_certificate_secret_is_refused_by_the_policy_unless_secrets_are_allowed() {
    let hook = Hook::Webhook {
        url: "https://hooks.ops.svc/sync".to_owned(),
        timeout: std::time::Duration::from_secs(1),
        tls: Some(crate::hooks::resource::WebhookTls {
            ca_bundle: Vec::new(),
            client_cert_secret: Some("informant-webhook-cert".to_owned()),
        }),
    };
    let s = settings(hook, &[]);
    let policy = urls(&["hooks.ops.svc"]);
    assert_eq!(
        policy.refusal(&s).as_deref(),
        Some(
            "spec.hook.webhook.tls.clientCertSecretRef names Secret \"informant-webhook-cert\", \
             which the manager reads only with --hook-allow-secrets"
        )
    );
    assert_eq!(policy.allow_secrets(true).refusal(&s), None);
    assert_eq!(Policy::open().refusal(&s), None, "open reads Secrets");
}
