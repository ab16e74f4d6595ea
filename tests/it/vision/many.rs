//! The bounds of one request: twenty-five images read in one long turn, one a step, on Bedrock
//! (whose Converse takes at most 20): every request shows at most 20, the newest always, and each
//! older one left out is a note naming it.

use agent_core::message::human_size;
use local_stack::model_server::Reply;
use local_stack::stack::Stack;
use serde_json::json;

use super::fixtures;
use super::{http, sent_files, texts, turn, Provider};

const USER: &str = "user-many";
const IMAGES: usize = 25;
const MOST: usize = 20;

#[tokio::test]
async fn twenty_five_images_read_in_one_turn_keep_each_request_within_twenty_the_newest_first() {
    let stack = Stack::new().await;
    let images: Vec<Vec<u8>> = (0..IMAGES).map(|n| fixtures::png(64, 48, 100 + n as u64)).collect();
    let path = |n: usize| format!("/ticket/img{:02}.png", n + 1);
    let objects =
        images.iter().enumerate().map(|(n, png)| (format!("{USER}/tickets/T-25/img{:02}.png", n + 1), png.clone()));
    stack.put_many(objects.collect()).await;
    stack.model.push((0..IMAGES).map(|n| Reply::tool("read_file", json!({"file_path": path(n)}))));
    stack.model.push([Reply::text("Twenty-five images seen.")]);
    let function = http(&stack, Provider::Bedrock, &[("MAX_STEPS", "30")]).await;
    let body = json!({"message": "Look at every image of the ticket", "ticket_id": "T-25"});
    let (status, answer) = turn(&function, USER, "s1", body).await;
    assert_eq!(status, 200, "{answer}");
    assert_eq!((answer["reply"].as_str(), answer["steps"].as_u64()), (Some("Twenty-five images seen."), Some(26)));

    let requests = stack.model.requests();
    assert_eq!(requests.len(), IMAGES + 1);
    let left_out = |n: usize| {
        format!(
            "[image {} (image/png, {}, 64×48): shown earlier, left out of this request to make room; read it again \
             with read_file to see it]",
            path(n),
            human_size(images[n].len() as u64)
        )
    };
    for (read, request) in requests.iter().enumerate() {
        // After `read` reads: the newest 20 of them, oldest first, each byte for byte.
        let shown: Vec<usize> = sent_files(request)
            .iter()
            .map(|file| {
                assert_eq!(file.media_type, "image/png");
                images.iter().position(|png| *png == file.bytes).expect("one of the images, unchanged")
            })
            .collect();
        let kept = read.saturating_sub(MOST)..read;
        assert_eq!(shown, kept.clone().collect::<Vec<_>>(), "request {read}");
        let text = texts(request);
        for n in 0..read {
            let noted = text.matches(&left_out(n)).count();
            assert_eq!(noted, usize::from(!kept.contains(&n)), "request {read}: the note of {}", path(n));
        }
    }
}
