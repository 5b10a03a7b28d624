//! The plan's part of `[secrets] inject` (`crate::secrets::inject`): the credentials found for the
//! listed hosts, the views that show their placeholders (a git store bound over, not masked; npm's
//! masked view with the placeholder on the host's line), the trust variables.
//!
//! Guards against the knob doing half its work: outside allowlist mode there is no proxy to put
//! the value back, so the launch refuses it rather than hand the jail a placeholder that fails.

use super::*;
use crate::jail::policy::SecretView;
use crate::secrets::inject::{self, Credential};
use crate::secrets::views::{self, Format};

/// The credentials to inject; `views` and `setenv` extended for them.
pub(super) fn plan(
    input: &PlanInput,
    home: &Path,
    mode: crate::net::Mode,
    views: &mut Vec<SecretView>,
    setenv: &mut Vec<(String, String)>,
) -> Result<Vec<Credential>> {
    let listed = &input.config.inject;
    if listed.is_empty() {
        return Ok(Vec::new());
    }
    if mode != crate::net::Mode::Allowlist {
        return Err(Error::Usage(
            "`[secrets] inject` needs the allowlist network mode (its proxy puts the credential \
             into requests): set `[network] mode = \"allowlist\"`, or remove `inject`"
                .into(),
        ));
    }
    let targets: Vec<(String, u16)> = listed.iter().filter_map(|h| inject::target(h)).collect();
    let io = |e| Error::io("making a placeholder for `[secrets] inject`", e);
    let mut fresh = inject::placeholder;
    let stores = crate::secrets::stores::credential_stores(home, &input.host);
    let mut planned = inject::plan(&stores, None, &targets, &mut fresh).map_err(io)?;
    let session_dir = crate::runtime_dir::SessionDir::of_home(&input.session_home);
    for (path, text) in std::mem::take(&mut planned.views) {
        views.push(SecretView {
            path,
            copy: session_dir.secret_view(views.len()),
            format: Format::Ini,
            text: Some(text),
        });
    }
    for v in views
        .iter_mut()
        .filter(|v| v.format == Format::Ini && v.text.is_none())
    {
        let Ok(original) = std::fs::read_to_string(&v.path) else {
            continue;
        };
        let masked = views::mask(&original, Format::Ini).unwrap_or_else(|| original.clone());
        let found = inject::plan(
            &[],
            Some((&v.path, &original, &masked)),
            &targets,
            &mut fresh,
        )
        .map_err(io)?;
        if let Some((_, text)) = found.views.into_iter().next() {
            v.text = Some(text);
        }
        planned.credentials.extend(found.credentials);
    }
    if !planned.credentials.is_empty() {
        setenv.extend(crate::net::proxy::tls::jail_env());
    }
    Ok(planned.credentials)
}

/// `masks` without the credential stores the jail sees through an `inject` view (bound over them,
/// they would be masked again after it).
pub(super) fn unmasked(masks: Vec<Mask>, views: &[SecretView]) -> Vec<Mask> {
    masks
        .into_iter()
        .filter(|m| !views.iter().any(|v| v.text.is_some() && v.path == m.path))
        .collect()
}
