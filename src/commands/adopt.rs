//! `claude-sandbox adopt NAME [--force] [--json]`: one program from the jail's layer to your PATH
//! directory (`adopt` decides and copies).

use crate::error::Error;

pub(super) fn exec(
    name: &str,
    force: bool,
    json: bool,
    env: &crate::host::HostEnv,
) -> crate::Result<i32> {
    if env.get(crate::host::IN_JAIL).is_some() {
        return Err(Error::Usage(
            "claude-sandbox adopt is for the human, outside the sandbox: in the jail your PATH \
             directories are read-only (ask the user to run it)"
                .into(),
        ));
    }
    let home = env.home_dir()?;
    let store = crate::jail::layers::store_dir(&home, env);
    let path = env
        .get(crate::host::PATH)
        .map(ToOwned::to_owned)
        .unwrap_or_default();
    let adoption = crate::adopt::plan(&home, &store, &path, name, force)?;
    crate::adopt::apply(&adoption)?;
    if json {
        println!(
            "{}",
            serde_json::to_string_pretty(&adoption).expect("serialisable")
        );
    } else {
        for line in crate::adopt::describe(&adoption, &home) {
            println!("{line}");
        }
    }
    Ok(0)
}
