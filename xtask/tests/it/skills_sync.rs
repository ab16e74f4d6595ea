//! `cargo xtask skills sync` run as a user runs it: the compiled xtask binary syncing into
//! moto_server on loopback, the versions it publishes, the index it rebuilds, the bundles it makes,
//! and a plugin marketplace read through the catalog of the compiled http-turn.

use serde_json::Value;

use crate::support::*;

/// The keys under `prefix` whose tail is `tail`.
async fn keys_ending(s3: &aws_sdk_s3::Client, bucket: &str, prefix: &str, tail: &str) -> Vec<String> {
    etags(s3, bucket, prefix).await.into_keys().filter(|key| key.ends_with(tail)).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn sync_publishes_each_skill_as_a_version_writes_the_rest_and_rebuilds_the_index() {
    use agent_core::skills::versions;

    let endpoint = local_stack::moto::moto().endpoint.clone();
    let config = local_stack::moto::sdk_config(&endpoint).await;
    let s3 = aws_sdk_s3::Client::from_conf(aws_sdk_s3::config::Builder::from(&config).force_path_style(true).build());
    let bucket = local_stack::moto::unique_name("sync");
    local_stack::moto::create_bucket(&s3, &bucket).await;
    let objects = aws_store::S3ObjectStore::new(s3.clone(), &bucket);
    let put = |key: &'static str, body: &'static str| {
        let s3 = s3.clone();
        let bucket = bucket.clone();
        async move { s3.put_object().bucket(bucket).key(key).body(body.as_bytes().to_vec().into()).send().await }
    };
    // Another tenant's skills, which a sync of u1 must leave alone; a skill of u1 written straight
    // under skills/ (as syncs did before versions), which a published skill replaces.
    put("u0/skills/theirs/SKILL.md", "theirs").await.unwrap();
    put("u1/skills/old/SKILL.md", "---\ndescription: Old.\n---\n").await.unwrap();
    put("u1/skills/old/.bundle/unmet/rdkit", "").await.unwrap();
    // A skill of u1's published through the API: no sync made it, so none deletes it.
    let u1 = agent_core::UserId::parse("u1").unwrap();
    let theirs = agent_core::ids::SkillPath::parse("api-skill").unwrap();
    let files = vec![versions::SkillFileBytes {
        path: "SKILL.md".into(),
        bytes: skill_md("Published by hand.", "name: api-skill\n").into_bytes(),
    }];
    versions::publish(&objects, &u1, &theirs, files, "ana", 1, None, None).await.unwrap();

    let scratch = Scratch::new();
    scratch.write("alpha/SKILL.md", skill_md("Alpha.", ""));
    scratch.write("alpha/notes.md", "first notes\n");
    scratch.write("beta/SKILL.md", skill_md("Beta.", ""));
    scratch.write("broken/SKILL.md", "no frontmatter\n");
    scratch.write("a/b/deep/SKILL.md", skill_md("Too deep.", ""));
    scratch.write("BASE_PROMPT.md", "You help with {skill}.\n");
    for i in 0..120 {
        scratch.write(&format!("alpha/data/{i:03}.txt"), format!("row {i}\n"));
    }
    // The local stack's settings, as `cargo xtask local` writes them, pointed at this test's moto.
    let settings = Scratch::new();
    let env_file = settings.0.join("local.env");
    std::fs::write(
        &env_file,
        format!(
            "SKILLS_BUCKET={bucket}\nAWS_ENDPOINT_URL={endpoint}\nAWS_ACCESS_KEY_ID=testing\n\
             AWS_SECRET_ACCESS_KEY=testing\nAWS_REGION=us-east-1\n"
        ),
    )
    .unwrap();
    let local = [("XTASK_LOCAL_ENV", env_file.to_str().unwrap()), ("USER", "ana")];
    let dir = scratch.0.to_str().unwrap();

    // A skill whose files are not a skill is not published; the others are, and the run fails.
    let output = tokio::task::block_in_place(|| xtask(&["skills", "sync", dir, "--user", "u1"], &local));
    assert_eq!(output.status.code(), Some(1), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "alpha: version 1 (new), default\nbeta: version 1 (new), default\nbroken: not published\n\
         skills: 2 new versions, 0 unchanged, 0 deleted, 1 not published; files: 2 uploaded, 0 unchanged, 2 removed; \
         3 skills indexed, 1 skipped\n"
    );
    assert!(stderr(&output).contains("  broken: SKILL.md: "), "{}", stderr(&output));
    assert!(stderr(&output).contains("1 skill was not published"), "{}", stderr(&output));
    let straight = etags(&s3, &bucket, "u1/skills/").await;
    assert_eq!(straight.keys().collect::<Vec<_>>(), ["u1/skills/BASE_PROMPT.md", "u1/skills/a/b/deep/SKILL.md"]);
    assert_eq!(etags(&s3, &bucket, "u1/skill-versions/alpha/@files/").await.len(), 122, "alpha's every file");
    let alpha = agent_core::ids::SkillPath::parse("alpha").unwrap();
    let first = versions::get_version(&objects, &u1, &alpha, 1).await.unwrap();
    assert_eq!(first.uploaded_by, "cargo xtask skills sync (ana)");
    let head_before = head(&objects, "u1").await;
    assert_eq!((head_before.total, head_before.skipped), (3, 1), "alpha, beta and the API's skill; the deep one");

    // A mark on objects that any upload of them would erase (a copy onto itself keeps the bytes).
    let notes = keys_ending(&s3, &bucket, "u1/skill-versions/alpha/", "/notes.md").await.pop().unwrap();
    for marked in [notes.as_str(), "u1/skills/BASE_PROMPT.md"] {
        s3.copy_object()
            .bucket(&bucket)
            .key(marked)
            .copy_source(format!("{bucket}/{marked}"))
            .metadata("mark", "kept")
            .metadata_directive(aws_sdk_s3::types::MetadataDirective::Replace)
            .send()
            .await
            .unwrap();
    }
    let marks = || async {
        let mut found = Vec::new();
        for marked in [notes.as_str(), "u1/skills/BASE_PROMPT.md"] {
            let head = s3.head_object().bucket(&bucket).key(marked).send().await.unwrap();
            found.push(head.metadata().and_then(|metadata| metadata.get("mark").cloned()));
        }
        found
    };
    assert_eq!(marks().await, [Some("kept".to_owned()), Some("kept".to_owned())]);

    // Nothing changed: no new version, nothing uploaded.
    let output = tokio::task::block_in_place(|| xtask(&["skills", "sync", dir, "--user", "u1"], &local));
    assert_eq!(
        stdout(&output),
        "alpha: version 1 (unchanged), default\nbeta: version 1 (unchanged), default\nbroken: not published\n\
         skills: 0 new versions, 2 unchanged, 0 deleted, 1 not published; files: 0 uploaded, 2 unchanged, 0 removed; \
         3 skills indexed, 1 skipped\n"
    );
    assert_eq!(marks().await, [Some("kept".to_owned()), Some("kept".to_owned())], "nothing was sent again");

    // One skill repaired, one changed, one removed.
    scratch.write("broken/SKILL.md", skill_md("Fixed now.", ""));
    scratch.write("alpha/notes.md", "second notes\n");
    std::fs::remove_file(scratch.0.join("beta/SKILL.md")).unwrap();
    let output = tokio::task::block_in_place(|| xtask(&["skills", "sync", dir, "--user", "u1"], &local));
    assert!(output.status.success(), "{}", stderr(&output));
    assert_eq!(
        stdout(&output),
        "alpha: version 2 (new), default\nbroken: version 1 (new), default\nbeta: deleted (no longer in the folder)\n\
         skills: 2 new versions, 0 unchanged, 1 deleted; files: 0 uploaded, 2 unchanged, 0 removed; \
         3 skills indexed, 1 skipped\n"
    );
    assert!(stderr(&output).contains("left alone: 1 published skill not in the folder"), "{}", stderr(&output));
    assert_eq!(etags(&s3, &bucket, "u1/skill-versions/beta/").await.len(), 0, "beta's versions are gone");
    let numbers: Vec<u32> =
        versions::list_versions(&objects, &u1, &alpha).await.unwrap().iter().map(|v| v.version).collect();
    assert_eq!(numbers, [1, 2], "the version before stays, to roll back to");
    assert_eq!(marks().await[0].as_deref(), Some("kept"), "version 1's files never change");
    let head_after = head(&objects, "u1").await;
    let inline = head_after.inline.expect("a small catalog is inline");
    assert_eq!(inline.skills.keys().collect::<Vec<_>>(), ["alpha", "api-skill", "broken"]);
    assert_eq!(inline.skills["broken"].description, "Fixed now.");
    assert_eq!(inline.skills["alpha"].version.as_ref().map(|tag| tag.number()), Some(2));
    assert_eq!(etags(&s3, &bucket, "u0/").await.len(), 1, "another tenant's prefix is untouched");

    // A real bucket: the SDK's usual environment (here pointed at moto).
    let before = etags(&s3, &bucket, "u1/").await;
    let aws = [
        ("AWS_ENDPOINT_URL", endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let output =
        tokio::task::block_in_place(|| xtask(&["skills", "sync", dir, "--user", "u2", "--bucket", &bucket], &aws));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(
        stdout(&output).ends_with(
            "skills: 2 new versions, 0 unchanged, 0 deleted; files: 2 uploaded, 0 unchanged, 0 removed; \
             2 skills indexed, 1 skipped\n"
        ),
        "{}",
        stdout(&output)
    );
    assert_eq!(etags(&s3, &bucket, "u1/").await, before, "u2's sync leaves u1 alone");

    let output = tokio::task::block_in_place(|| xtask(&["skills", "sync", dir, "--user", "../u1"], &local));
    assert_eq!(output.status.code(), Some(1));
    assert!(stderr(&output).contains("--user \"../u1\" is not a usable id"), "{}", stderr(&output));
    assert_eq!(etags(&s3, &bucket, "").await.keys().filter(|key| key.starts_with("..")).count(), 0);
}

/// `GET /skills` by `user`, as the HTTP API hands it to http-turn.
fn skills_event(user: &str) -> Value {
    let mut event = local_stack::stack::get_event(Some(user), "s");
    event["rawPath"] = serde_json::json!("/skills");
    event["requestContext"]["http"]["path"] = serde_json::json!("/skills");
    event
}

/// A skill's needs the image lacks, bundled by `skills sync` from a wheel folder (no network: pip
/// has no index), then installed offline by the sandbox on first use, through the compiled
/// http-turn with the local backend and with the Lambda backend running the compiled sandbox in the
/// image; the second call does not install again, another tenant does not get the bundle, and a
/// need no wheel meets is a warning in `GET /skills`.
#[tokio::test(flavor = "multi_thread")]
async fn sync_bundles_what_the_image_lacks_and_the_sandbox_installs_it_offline_per_tenant() {
    use local_stack::model_server::Reply;
    use local_stack::stack::{status_and_body, tool_results, turn_event, Stack};

    let stack = Stack::new().await;
    let wheels = Scratch::new();
    local_stack::image::write_test_wheel(&wheels.0);
    let scratch = Scratch::new();
    scratch.write("fechas/SKILL.md", skill_md("Plazos notariales.", "name: fechas\n"));
    scratch.write("fechas/requirements.txt", "notarial-dates==1.0\n");
    scratch.write("fechas/scripts/plazo.py", "import notarial_dates\nprint(notarial_dates.plazo(10))\n");
    scratch.write("raro/SKILL.md", skill_md("Needs what no index has.", "name: raro\n"));
    scratch.write("raro/requirements.txt", "no-such-package-anywhere==9.9\n");
    let aws = [
        ("AWS_ENDPOINT_URL", stack.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
        ("PIP_NO_INDEX", "1"),
        // The key the stack's functions check bundles with.
        ("BUNDLE_SIGNING_KEY", local_stack::stack::TEST_BUNDLE_KEY),
    ];
    let (dir, links) = (scratch.0.to_str().unwrap(), wheels.0.to_str().unwrap());
    let sync = |user: &str| {
        let args = ["skills", "sync", dir, "--user", user, "--bucket", &stack.bucket, "--find-links", links];
        tokio::task::block_in_place(|| xtask(&args, &aws))
    };
    let output = sync("u-bundle");
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).contains("2 bundle files sent"), "{}", stdout(&output));
    assert!(stderr(&output).contains("fechas: bundled notarial-dates==1.0"), "{}", stderr(&output));
    // Each bundle is stored with its version's files, beside them under .bundle/.
    let stored = etags(&stack.s3, &stack.bucket, "u-bundle/skill-versions/").await;
    let in_version = |skill: &str, tail: &str| {
        stored.keys().any(|key| {
            key.strip_prefix(&format!("u-bundle/skill-versions/{skill}/@files/"))
                .and_then(|rest| rest.split_once('/'))
                .is_some_and(|(_, rel)| rel.starts_with(".bundle/") && rel.ends_with(tail))
        })
    };
    assert!(in_version("fechas", ".tar"), "{stored:?}");
    assert!(in_version("raro", ".bundle/unmet/no-such-package-anywhere"), "{stored:?}");
    assert_eq!(etags(&stack.s3, &stack.bucket, "u-bundle/skills/").await.len(), 0, "no skill is written straight");
    // The same folder again: the same version, the bundle the same bytes, so nothing is sent.
    let again = sync("u-bundle");
    assert!(stdout(&again).starts_with("fechas: version 1 (unchanged), default\n"), "{}", stdout(&again));
    assert!(!stdout(&again).contains("bundle files sent"), "{}", stdout(&again));
    assert_eq!(etags(&stack.s3, &stack.bucket, "u-bundle/skill-versions/").await, stored);

    let bundles = Scratch::new();
    let env = local_stack::image::local_sandbox_env();
    let mut env: Vec<(&str, &str)> = env.iter().map(|(key, value)| (*key, value.as_str())).collect();
    env.push(("SANDBOX_BUNDLE_DIR", bundles.0.to_str().unwrap()));
    let http = stack.http(&env).await;

    // The unmet need is said where the owner looks.
    let (status, body) = status_and_body(&http.call(skills_event("u-bundle")).await);
    assert_eq!(status, 200, "{body}");
    let raro = body["skills"].as_array().unwrap().iter().find(|skill| skill["path"] == "raro").expect("raro").clone();
    assert!(raro["warnings"][0].as_str().unwrap().contains("`no-such-package-anywhere`"), "{raro}");
    assert_eq!(raro["unmet_needs"], serde_json::json!(["no-such-package-anywhere"]));
    let fechas = body["skills"].as_array().unwrap().iter().find(|skill| skill["path"] == "fechas").unwrap().clone();
    assert_eq!(fechas["warnings"], serde_json::json!([]), "{fechas}");

    let run = |command: &str| Reply::tool("execute", serde_json::json!({ "command": command, "timeout": 120 }));
    let script = "python /skills/fechas/scripts/plazo.py";
    stack.model.push([
        Reply::tool("load_skill", serde_json::json!({"skill_path": "fechas"})),
        run(&format!("{script}; ls -a /skills/fechas")),
        run(&format!(
            "{script} && python -c \"import socket; socket.create_connection(('pypi.org', 443), 2)\" 2>/dev/null || echo 'no network'"
        )),
        Reply::text("Done."),
    ]);
    let (status, body) =
        status_and_body(&http.call(turn_event(Some("u-bundle"), "s1", serde_json::json!({"message": "plazo"}))).await);
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    let first = tool_results(&requests[2]).pop().unwrap();
    let second = tool_results(&requests[3]).pop().unwrap();
    assert!(first.starts_with("plazo de 10 dias habiles\n"), "{first}");
    assert!(!first.contains(".bundle"), "the bundle folder is not part of the skill: {first}");
    assert!(second.starts_with("plazo de 10 dias habiles\nno network"), "{second}");
    let installs = http.logs().iter().filter(|line| line.contains("installed a skill's bundle")).count();
    assert_eq!(installs, 1, "the second call used the installed bundle");
    let tenants = std::fs::read_dir(&bundles.0).unwrap().count();
    assert_eq!(tenants, 1, "one tenant's folder");

    // Another tenant with the same skill's files but no bundle: the first tenant's install is not theirs.
    for (rel, bytes) in
        [("fechas/SKILL.md", skill_md("Plazos.", "")), ("fechas/scripts/plazo.py", "import notarial_dates\n".into())]
    {
        let key = format!("u-other/skills/{rel}");
        stack.s3.put_object().bucket(&stack.bucket).key(key).body(bytes.into_bytes().into()).send().await.unwrap();
    }
    stack.model.push([
        Reply::tool("load_skill", serde_json::json!({"skill_path": "fechas"})),
        run(script),
        Reply::text("Done."),
    ]);
    let (status, _) =
        status_and_body(&http.call(turn_event(Some("u-other"), "s1", serde_json::json!({"message": "plazo"}))).await);
    assert_eq!(status, 200);
    let other = tool_results(&stack.model.requests()[6]).pop().unwrap();
    assert!(other.contains("ModuleNotFoundError: No module named 'notarial_dates'"), "{other}");

    // The Lambda backend: the compiled sandbox in the image gets the bundle in parts, once.
    let api = local_stack::lambda_invoke::InvokeApi::start().await;
    let lambda = stack
        .http(&[("SANDBOX", "lambda"), ("SANDBOX_FUNCTION", "sandbox"), ("AWS_ENDPOINT_URL_LAMBDA", &api.endpoint)])
        .await;
    let script = "python /tmp/sandbox/skills/fechas/scripts/plazo.py";
    stack.model.push([
        Reply::tool("load_skill", serde_json::json!({"skill_path": "fechas"})),
        run(script),
        run(script),
        Reply::text("Done."),
    ]);
    let (status, body) = status_and_body(
        &lambda.call(turn_event(Some("u-bundle"), "s2", serde_json::json!({"message": "plazo"}))).await,
    );
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    for step in [9, 10] {
        let result = tool_results(&requests[step]).pop().unwrap();
        assert!(result.starts_with("plazo de 10 dias habiles\n"), "{step}: {result}");
    }
    let sent = lambda.logs().iter().filter(|line| line.contains("sent a skill's bundle")).count();
    assert_eq!(sent, 1, "the bundle is sent once per environment");
}

/// A sync that would make a bundle refuses to run without the bundle signing key, before pip runs
/// or any bucket is reached: an unsigned bundle would never be installed.
#[test]
fn sync_makes_no_bundle_without_the_signing_key() {
    let scratch = Scratch::new();
    scratch.write("fechas/SKILL.md", skill_md("Plazos notariales.", "name: fechas\n"));
    scratch.write("fechas/requirements.txt", "notarial-dates==1.0\n");
    let dir = scratch.0.to_str().unwrap();
    let output = xtask(&["skills", "sync", dir, "--user", "u1", "--bucket", "no-such-bucket"], &[]);
    assert!(!output.status.success());
    let error = stderr(&output);
    assert!(error.contains("--bundle-key-secret") && error.contains("BUNDLE_SIGNING_KEY"), "{error}");
    assert!(error.contains("--no-bundles"), "{error}");
    let short = xtask(&["skills", "sync", dir, "--user", "u1", "--bucket", "b"], &[("BUNDLE_SIGNING_KEY", "short")]);
    assert!(stderr(&short).contains("BUNDLE_SIGNING_KEY: a bundle signing key holds 32"), "{}", stderr(&short));
}

/// A repository laid out as a Claude Code plugin marketplace (`[group/]plugin/skills/name/SKILL.md`,
/// `.claude-plugin/marketplace.json`), as published: validate loads every skill and counts them by
/// plugin, sync publishes each skill as a version, and the catalog of the compiled http-turn lists the skills under
/// their plugin and loads one with its files; two plugins' skills of the same name stay apart.
#[tokio::test(flavor = "multi_thread")]
async fn a_plugin_marketplace_loads_in_validate_sync_and_the_catalog() {
    use local_stack::model_server::Reply;
    use local_stack::stack::{status_and_body, tool_results, turn_event, Stack};

    let scratch = Scratch::new();
    scratch.write(
        ".claude-plugin/marketplace.json",
        r#"{"name": "market", "plugins": [
            {"name": "eng", "source": "./engineering-team"},
            {"name": "pw", "source": "./engineering-team/playwright-pro"},
            {"name": "gone", "source": "./missing"},
            {"name": "remote", "source": {"source": "github", "repo": "o/r"}}
        ]}"#,
    );
    scratch.write("engineering-team/.claude-plugin/plugin.json", "{}");
    scratch
        .write("engineering-team/skills/a11y-audit/SKILL.md", skill_md("Audits accessibility.", "name: a11y-audit\n"));
    scratch.write("engineering-team/skills/a11y-audit/scripts/check.py", "print('a11y ok')\n");
    scratch.write("engineering-team/skills/review/SKILL.md", skill_md("Reviews code.", "name: review\n"));
    scratch
        .write("engineering-team/playwright-pro/skills/review/SKILL.md", skill_md("Reviews tests.", "name: review\n"));
    scratch.write("loose/SKILL.md", skill_md("In no plugin.", ""));
    // Another tool's copy of the same skills, in a hidden folder: not the tenant's skills.
    scratch.write(".gemini/skills/a11y-audit/SKILL.md", skill_md("A copy.", ""));

    let (output, report) = validate_json(&scratch.0);
    assert!(output.status.success(), "{}", stderr(&output));
    let loaded: Vec<&str> = report["loaded"].as_array().unwrap().iter().map(|s| s["path"].as_str().unwrap()).collect();
    assert_eq!(
        loaded,
        [
            "engineering-team/playwright-pro/skills/review",
            "engineering-team/skills/a11y-audit",
            "engineering-team/skills/review",
            "loose"
        ]
    );
    assert_eq!(report["totals"]["skipped"], 0, "{report}");
    let plugins: Vec<(String, u64, Option<String>)> = report["marketplace"]["plugins"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            (
                p["name"].as_str().unwrap().to_owned(),
                p["skills"].as_u64().unwrap(),
                p["warning"].as_str().map(str::to_owned),
            )
        })
        .collect();
    assert_eq!(plugins[0], ("eng".to_owned(), 2, None));
    assert_eq!(plugins[1], ("pw".to_owned(), 1, None));
    assert_eq!(plugins[2], ("gone".to_owned(), 0, Some("its folder is not here".to_owned())));
    assert!(plugins[3].2.as_deref().unwrap().contains("not a folder of this repository"), "{plugins:?}");
    assert_eq!(report["marketplace"]["not_in_a_plugin"], serde_json::json!(["loose"]));
    let text = xtask(&["skills", "validate", scratch.0.to_str().unwrap()], &[]);
    assert!(
        stdout(&text).contains("marketplace market (.claude-plugin/marketplace.json): 4 plugins"),
        "{}",
        stdout(&text)
    );
    assert!(stdout(&text).contains("  pw (engineering-team/playwright-pro): 1 skill\n"), "{}", stdout(&text));

    let stack = Stack::new().await;
    let aws = [
        ("AWS_ENDPOINT_URL", stack.endpoint.as_str()),
        ("AWS_ACCESS_KEY_ID", "testing"),
        ("AWS_SECRET_ACCESS_KEY", "testing"),
        ("AWS_REGION", "us-east-1"),
        ("AWS_EC2_METADATA_DISABLED", "true"),
    ];
    let dir = scratch.0.to_str().unwrap();
    let args = ["skills", "sync", dir, "--user", "u-market", "--bucket", &stack.bucket, "--no-bundles"];
    let output = tokio::task::block_in_place(|| xtask(&args, &aws));
    assert!(output.status.success(), "{}", stderr(&output));
    assert!(stdout(&output).ends_with("; 4 skills indexed, 0 skipped\n"), "{}", stdout(&output));
    assert!(
        stdout(&output).contains("engineering-team/playwright-pro/skills/review: version 1 (new), default\n"),
        "{}",
        stdout(&output)
    );
    let stored = etags(&stack.s3, &stack.bucket, "u-market/").await;
    let script = stored.keys().any(|key| {
        key.starts_with("u-market/skill-versions/engineering-team/skills/a11y-audit/@files/")
            && key.ends_with("/scripts/check.py")
    });
    assert!(script, "the skill's script is one of its version's files: {stored:?}");
    assert!(!stored.keys().any(|key| key.contains("/.")), "hidden folders stay out: {stored:?}");

    let http = stack.http(&[]).await;
    let (status, body) = status_and_body(&http.call(skills_event("u-market")).await);
    assert_eq!(status, 200, "{body}");
    let skills = body["skills"].as_array().unwrap();
    let a11y = skills.iter().find(|s| s["path"] == "engineering-team/skills/a11y-audit").expect("listed").clone();
    assert_eq!(a11y["category"], "engineering-team", "{a11y}");
    let pw = skills.iter().find(|s| s["path"] == "engineering-team/playwright-pro/skills/review").expect("listed");
    assert_eq!(pw["category"], "playwright-pro", "{pw}");

    // A turn loads the plugin's skill by its name and reads its script; the name two plugins share
    // is answered with both paths.
    stack.model.push([
        Reply::tool("load_skill", serde_json::json!({"skill_path": "a11y-audit"})),
        Reply::tool("read_file", serde_json::json!({"file_path": "/skills/a11y-audit/scripts/check.py"})),
        Reply::tool("load_skill", serde_json::json!({"skill_path": "review"})),
        Reply::text("Done."),
    ]);
    let (status, body) =
        status_and_body(&http.call(turn_event(Some("u-market"), "s1", serde_json::json!({"message": "audit"}))).await);
    assert_eq!(status, 200, "{body}");
    let requests = stack.model.requests();
    let loaded = tool_results(&requests[1]).pop().unwrap();
    assert!(loaded.contains("Skill engineering-team/skills/a11y-audit loaded"), "{loaded}");
    assert!(requests[2].to_string().contains("# Instructions"), "the SKILL.md is the next call's system prompt");
    let script = tool_results(&requests[2]).pop().unwrap();
    assert!(script.contains("print('a11y ok')"), "{script}");
    let ambiguous = tool_results(&requests[3]).pop().unwrap();
    assert!(
        ambiguous.contains("engineering-team/skills/review")
            && ambiguous.contains("engineering-team/playwright-pro/skills/review"),
        "{ambiguous}"
    );
}
