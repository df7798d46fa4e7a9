//! ListMultipartUploads' paging: the query, the page, and S3's order over
//! the open uploads of a bucket (pure, so it is tested without a node).

use s3s::S3Result;

/// An unfinished upload, as ListMultipartUploads shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct OpenUpload {
    pub key: String,
    pub id: String,
    pub initiated_ms: u64,
}

/// What a ListMultipartUploads asks for.
#[derive(Clone, Debug, Default)]
pub(crate) struct UploadQuery {
    pub prefix: String,
    pub delimiter: Option<String>,
    pub key_marker: Option<String>,
    pub upload_id_marker: Option<String>,
    /// 1 to 1,000.
    pub max: usize,
}

/// One page of ListMultipartUploads.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct UploadPage {
    pub uploads: Vec<OpenUpload>,
    pub prefixes: Vec<String>,
    pub truncated: bool,
    /// NextKeyMarker and NextUploadIdMarker (empty after a common prefix).
    pub next: Option<(String, String)>,
}

/// S3's paging of ListMultipartUploads over every upload whose key starts
/// with the prefix: by key, then upload id; with a delimiter, the keys
/// that hold it after the prefix roll up into one common prefix each
/// (counted as one entry); after `key-marker` alone come the keys above
/// it, and with `upload-id-marker` also the uploads of that key with
/// higher ids; at most `max` entries.
pub(crate) fn page_uploads(mut all: Vec<OpenUpload>, q: &UploadQuery) -> S3Result<UploadPage> {
    all.sort_by(|a, b| (&a.key, &a.id).cmp(&(&b.key, &b.id)));
    let km = q.key_marker.as_deref().unwrap_or("");
    let um = q.upload_id_marker.as_deref().filter(|_| !km.is_empty());
    let mut page = UploadPage::default();
    let mut count = 0;
    for u in all {
        let rolled = q
            .delimiter
            .as_deref()
            .filter(|d| !d.is_empty())
            .and_then(|d| {
                let rest = u.key.get(q.prefix.len()..)?;
                rest.find(d)
                    .map(|i| u.key[..q.prefix.len() + i + d.len()].to_string())
            });
        match rolled {
            Some(cp) => {
                // Once per common prefix, and not again after a marker at
                // or inside it.
                if page.prefixes.last() == Some(&cp) || cp.as_str() <= km || km.starts_with(&cp) {
                    continue;
                }
                if count == q.max {
                    page.truncated = true;
                    break;
                }
                page.next = Some((cp.clone(), String::new()));
                page.prefixes.push(cp);
            }
            None => {
                let after = match um {
                    Some(um) => u.key.as_str() > km || (u.key == km && u.id.as_str() > um),
                    None => u.key.as_str() > km,
                };
                if !after {
                    continue;
                }
                if count == q.max {
                    page.truncated = true;
                    break;
                }
                page.next = Some((u.key.clone(), u.id.clone()));
                page.uploads.push(u);
            }
        }
        count += 1;
    }
    if !page.truncated {
        page.next = None;
    }
    Ok(page)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn up(key: &str, id: &str) -> OpenUpload {
        OpenUpload {
            key: key.into(),
            id: id.into(),
            initiated_ms: 0,
        }
    }

    #[test]
    fn uploads_page_like_s3() {
        let all = vec![
            up("b", "2"),
            up("a", "1"),
            up("b", "1"),
            up("dir/x", "1"),
            up("dir/y", "1"),
            up("c", "9"),
        ];
        let q = |km: Option<&str>, um: Option<&str>, max: usize, delim: Option<&str>| UploadQuery {
            prefix: String::new(),
            delimiter: delim.map(str::to_string),
            key_marker: km.map(str::to_string),
            upload_id_marker: um.map(str::to_string),
            max,
        };
        let keys = |p: &UploadPage| {
            p.uploads
                .iter()
                .map(|u| format!("{}:{}", u.key, u.id))
                .collect::<Vec<_>>()
        };
        // Walk every page of two: each upload once, in order.
        let mut seen = Vec::new();
        let (mut km, mut um) = (None::<String>, None::<String>);
        loop {
            let p = page_uploads(all.clone(), &q(km.as_deref(), um.as_deref(), 2, None)).unwrap();
            seen.extend(keys(&p));
            if !p.truncated {
                break;
            }
            let (k, u) = p.next.unwrap();
            (km, um) = (Some(k), Some(u));
        }
        assert_eq!(seen, ["a:1", "b:1", "b:2", "c:9", "dir/x:1", "dir/y:1"]);
        // A key marker alone skips every upload of that key.
        let p = page_uploads(all.clone(), &q(Some("b"), None, 10, None)).unwrap();
        assert_eq!(keys(&p), ["c:9", "dir/x:1", "dir/y:1"]);
        // With a delimiter, dir/ is one entry, and a page starting after it
        // does not repeat it.
        let p = page_uploads(all.clone(), &q(None, None, 10, Some("/"))).unwrap();
        assert_eq!(
            (keys(&p).len(), p.prefixes.clone()),
            (4, vec!["dir/".to_string()])
        );
        let p = page_uploads(all.clone(), &q(None, None, 4, Some("/"))).unwrap();
        assert!(p.truncated);
        assert_eq!(p.next, Some(("c".into(), "9".into())));
        let p = page_uploads(all, &q(Some("c"), Some("9"), 4, Some("/"))).unwrap();
        assert_eq!(
            (keys(&p).len(), p.prefixes, p.truncated),
            (0, vec!["dir/".to_string()], false)
        );
    }
}
