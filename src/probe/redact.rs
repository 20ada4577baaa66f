//! Keeping secrets out of what a run writes down. The API key never enters the configuration
//! (only the name of the variable holding it does), but a user may put credentials in the URL
//! (`http://user:password@host`, `?api_key=…`); `run.json` keeps the URL and the command line
//! with those parts replaced, and `--resume` then asks for the URL again.

/// What replaces a secret.
pub const REDACTED: &str = "REDACTED";

/// Query parameters whose values are secrets.
fn secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    [
        "key",
        "token",
        "secret",
        "password",
        "passwd",
        "auth",
        "signature",
        "sig",
        "credential",
    ]
    .iter()
    .any(|word| name.contains(word))
}

/// `url` with its password and secret query values replaced; unchanged when it has none (or
/// is not a URL).
pub fn redact_url(url: &str) -> String {
    let Some(scheme_end) = url.find("://") else {
        return url.to_string();
    };
    let (scheme, rest) = url.split_at(scheme_end + 3);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let (authority, tail) = rest.split_at(authority_end);
    let authority = match authority.rsplit_once('@') {
        Some((userinfo, host)) => match userinfo.split_once(':') {
            Some((user, _)) => format!("{user}:{REDACTED}@{host}"),
            // A lone user name can be a token too (https://TOKEN@host).
            None => format!("{REDACTED}@{host}"),
        },
        None => authority.to_string(),
    };
    let tail = match tail.split_once('?') {
        Some((path, query)) => {
            let (query, fragment) = match query.split_once('#') {
                Some((q, f)) => (q, format!("#{f}")),
                None => (query, String::new()),
            };
            let query = query
                .split('&')
                .map(|pair| match pair.split_once('=') {
                    Some((name, _)) if secret_name(name) => format!("{name}={REDACTED}"),
                    _ => pair.to_string(),
                })
                .collect::<Vec<_>>()
                .join("&");
            format!("{path}?{query}{fragment}")
        }
        None => tail.to_string(),
    };
    format!("{scheme}{authority}{tail}")
}

/// The command line with every URL redacted (`--url X` and `--url=X` alike).
pub fn redact_command(args: impl IntoIterator<Item = String>) -> Vec<String> {
    args.into_iter()
        .map(|arg| match arg.split_once('=') {
            Some((flag, value)) if flag.starts_with("--") => {
                format!("{flag}={}", redact_url(value))
            }
            _ => redact_url(&arg),
        })
        .collect()
}

/// Whether `url` lost something to redaction (it cannot be used to connect).
pub fn was_redacted(url: &str) -> bool {
    url.contains(REDACTED)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn passwords_tokens_and_secret_parameters_are_replaced() {
        assert_eq!(
            redact_url("https://bob:hunter2@api.example.com/v1?api_key=abc&model=m#x"),
            "https://bob:REDACTED@api.example.com/v1?api_key=REDACTED&model=m#x"
        );
        assert_eq!(
            redact_url("https://ghp_token123@host:8443"),
            "https://REDACTED@host:8443"
        );
        assert_eq!(
            redact_url("http://127.0.0.1:8000/v1?Access_Token=t&x=1"),
            "http://127.0.0.1:8000/v1?Access_Token=REDACTED&x=1"
        );
        // Nothing secret: unchanged, and so is a path with an @ after the host.
        for clean in [
            "http://127.0.0.1:8000",
            "http://h/v1/users/@me",
            "not a url",
        ] {
            assert_eq!(redact_url(clean), clean);
            assert!(!was_redacted(&redact_url(clean)));
        }
        assert_eq!(
            redact_command(
                [
                    "capplan",
                    "--url=http://a:b@h",
                    "--url",
                    "http://c:d@h",
                    "--ttft",
                    "2s"
                ]
                .map(String::from)
            ),
            [
                "capplan",
                "--url=http://a:REDACTED@h",
                "--url",
                "http://c:REDACTED@h",
                "--ttft",
                "2s"
            ]
        );
    }
}
