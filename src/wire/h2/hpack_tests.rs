//! RFC 7541 Appendix C, and the limits.

use super::*;

fn hex(s: &str) -> Vec<u8> {
    let s: String = s.chars().filter(|c| c.is_ascii_hexdigit()).collect();
    (0..s.len())
        .step_by(2)
        .map(|i| u8::from_str_radix(&s[i..i + 2], 16).unwrap())
        .collect()
}

fn fields(d: &mut Decoder, block: &str) -> Vec<(String, String)> {
    let mut got = Vec::new();
    d.decode(&hex(block), &mut |n, v| {
        got.push((
            String::from_utf8_lossy(n).into_owned(),
            String::from_utf8_lossy(v).into_owned(),
        ))
    })
    .unwrap();
    got
}

fn pairs(p: &[(&str, &str)]) -> Vec<(String, String)> {
    p.iter()
        .map(|(n, v)| (n.to_string(), v.to_string()))
        .collect()
}

const REQ1: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
];
const REQ2: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "http"),
    (":path", "/"),
    (":authority", "www.example.com"),
    ("cache-control", "no-cache"),
];
const REQ3: &[(&str, &str)] = &[
    (":method", "GET"),
    (":scheme", "https"),
    (":path", "/index.html"),
    (":authority", "www.example.com"),
    ("custom-key", "custom-value"),
];

fn requests(blocks: [&str; 3]) {
    let mut d = Decoder::new();
    assert_eq!(fields(&mut d, blocks[0]), pairs(REQ1));
    assert_eq!(d.table_size(), 57);
    assert_eq!(fields(&mut d, blocks[1]), pairs(REQ2));
    assert_eq!(d.table_size(), 110);
    assert_eq!(fields(&mut d, blocks[2]), pairs(REQ3));
    assert_eq!(d.table_size(), 164);
}

#[test]
fn rfc7541_c3_requests_without_huffman_decode_and_fill_the_table() {
    requests([
        "8286 8441 0f77 7777 2e65 7861 6d70 6c65 2e63 6f6d",
        "8286 84be 5808 6e6f 2d63 6163 6865",
        "8287 85bf 400a 6375 7374 6f6d 2d6b 6579 0c63 7573 746f 6d2d 7661 6c75 65",
    ]);
}

#[test]
fn rfc7541_c4_requests_with_huffman_decode_the_same() {
    requests([
        "8286 8441 8cf1 e3c2 e5f2 3a6b a0ab 90f4 ff",
        "8286 84be 5886 a8eb 1064 9cbf",
        "8287 85bf 4088 25a8 49e9 5ba9 7d7f 8925 a849 e95b b8e8 b4bf",
    ]);
}

const RESP1: &[(&str, &str)] = &[
    (":status", "302"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
    ("location", "https://www.example.com"),
];
const RESP2: &[(&str, &str)] = &[
    (":status", "307"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:21 GMT"),
    ("location", "https://www.example.com"),
];
const RESP3: &[(&str, &str)] = &[
    (":status", "200"),
    ("cache-control", "private"),
    ("date", "Mon, 21 Oct 2013 20:13:22 GMT"),
    ("location", "https://www.example.com"),
    ("content-encoding", "gzip"),
    (
        "set-cookie",
        "foo=ASDJKHQKBZXOQWEOPIUAXQWEOIU; max-age=3600; version=1",
    ),
];

/// C.5/C.6 run with `SETTINGS_HEADER_TABLE_SIZE` 256: the encoder says so with a size update,
/// which the test prepends (`3f e1 01` = 256) to the first block.
fn responses(blocks: [&str; 3]) {
    let mut d = Decoder::new();
    let first = format!("3fe101 {}", blocks[0]);
    assert_eq!(fields(&mut d, &first), pairs(RESP1));
    assert_eq!(d.table_size(), 222);
    assert_eq!(fields(&mut d, blocks[1]), pairs(RESP2));
    assert_eq!(d.table_size(), 222);
    assert_eq!(fields(&mut d, blocks[2]), pairs(RESP3));
    assert_eq!(d.table_size(), 215, "evictions leave three entries");
    // The oldest entries were evicted: index 65 no longer exists.
    assert!(matches!(
        d.decode(&[0x80 | 65], &mut |_, _| {}),
        Err(HpackError::BadIndex { index: 65, .. })
    ));
}

#[test]
fn rfc7541_c5_responses_without_huffman_evict_as_the_table_fills() {
    responses([
        "4803 3330 3258 0770 7269 7661 7465 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133
         2032 303a 3133 3a32 3120 474d 546e 1768 7474 7073 3a2f 2f77 7777 2e65 7861 6d70
         6c65 2e63 6f6d",
        "4803 3330 37c1 c0bf",
        "88c1 611d 4d6f 6e2c 2032 3120 4f63 7420 3230 3133 2032 303a 3133 3a32 3220 474d
         54c0 5a04 677a 6970 7738 666f 6f3d 4153 444a 4b48 514b 425a 584f 5157 454f 5049
         5541 5851 5745 4f49 553b 206d 6178 2d61 6765 3d33 3630 303b 2076 6572 7369 6f6e
         3d31",
    ]);
}

#[test]
fn rfc7541_c6_responses_with_huffman_evict_the_same() {
    responses([
        "4882 6402 5885 aec3 771a 4b61 96d0 7abe 9410 54d4 44a8 2005 9504 0b81 66e0 82a6
         2d1b ff6e 919d 29ad 1718 63c7 8f0b 97c8 e9ae 82ae 43d3",
        "4883 640e ffc1 c0bf",
        "88c1 6196 d07a be94 1054 d444 a820 0595 040b 8166 e084 a62d 1bff c05a 839b d9ab
         77ad 94e7 821d d7f2 e6c7 b335 dfdf cd5b 3960 d5af 2708 7f36 72c1 ab27 0fb5 291f
         9587 3160 65c0 03ed 4ee5 b106 3d50 07",
    ]);
}

#[test]
fn bad_blocks_are_errors_not_panics() {
    let mut d = Decoder::new();
    let mut nop = |_: &[u8], _: &[u8]| {};
    assert_eq!(
        d.decode(&[0x80], &mut nop),
        Err(HpackError::BadIndex {
            index: 0,
            dynamic: 0
        })
    );
    assert_eq!(
        d.decode(&[0xbe], &mut nop),
        Err(HpackError::BadIndex {
            index: 62,
            dynamic: 0
        })
    );
    assert_eq!(
        d.decode(&[0x40, 0x05, b'a'], &mut nop),
        Err(HpackError::Truncated)
    );
    assert_eq!(
        d.decode(&[0xff, 0xff], &mut nop),
        Err(HpackError::Truncated)
    );
    let long = [0xff, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01];
    assert_eq!(d.decode(&long, &mut nop), Err(HpackError::IntegerOverflow));
    assert_eq!(
        d.decode(&[0x82, 0x20], &mut nop),
        Err(HpackError::LateSizeUpdate)
    );
    // A size update over what the receiver allowed (4096 by default): 8192.
    assert_eq!(
        d.decode(&[0x3f, 0xe1, 0x3f], &mut nop),
        Err(HpackError::TableSize {
            size: 8192,
            max: 4096
        })
    );
    d.allow_max_size(8192);
    assert_eq!(d.decode(&[0x3f, 0xe1, 0x3f], &mut nop), Ok(()));
    d.allow_max_size(1 << 30);
    let huge = [0x3f, 0xe1, 0xff, 0x7f]; // 2^21 + 4064
    assert!(matches!(
        d.decode(&huge, &mut nop),
        Err(HpackError::TableSize { .. })
    ));
    // EOS inside a Huffman string.
    assert_eq!(
        d.decode(&[0x40, 0x84, 0xff, 0xff, 0xff, 0xff, 0x00], &mut nop),
        Err(HpackError::Huffman)
    );
}

#[test]
fn a_header_list_past_the_limit_is_refused_and_the_table_stays_bounded() {
    let mut d = Decoder::new();
    // 40 literal fields of 2 KiB values with incremental indexing: 80 KiB of list.
    let mut block = Vec::new();
    for _ in 0..40 {
        block.extend_from_slice(&[0x40, 0x01, b'x', 0x7f, 0x81, 0x0f]); // value length 2048
        block.extend(std::iter::repeat_n(b'v', 2048));
    }
    let mut n = 0;
    assert_eq!(
        d.decode(&block, &mut |_, _| n += 1),
        Err(HpackError::ListTooLarge)
    );
    assert!(n < 40);
    assert!(d.table_size() <= DEFAULT_TABLE_SIZE);
}

#[test]
fn random_bytes_never_panic_and_never_grow_the_table_past_its_size() {
    // A small deterministic generator: no test depends on a seed source.
    let mut x = 0x2545_f491_4f6c_dd1du64;
    let mut next = move || {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x
    };
    let mut d = Decoder::new();
    d.allow_max_size(TABLE_CAP as u32);
    for _ in 0..2000 {
        let len = (next() % 64) as usize;
        let block: Vec<u8> = (0..len).map(|_| next() as u8).collect();
        let _ = d.decode(&block, &mut |_, _| {});
        assert!(d.table_size() <= TABLE_CAP);
    }
}
