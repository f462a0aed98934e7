use super::super::ops::reference;
use super::super::test_data::bits;
use super::*;

fn values(n: usize, seed: u64) -> Vec<f32> {
    super::super::test_data::values(n, seed, 4.0)
}

#[test]
fn fast_attention_is_bit_identical_to_the_plain_loops() {
    for (batch, seq, heads, kv_heads, head_dim) in [
        (1, 1, 1, 1, 2),
        (2, 7, 4, 2, 8),
        (3, 16, 6, 3, 4),
        (1, 33, 2, 1, 16),
        (2, 9, 4, 2, 27),
        // Every mix of widths: 16 + 8, 32 + 8, 32 + 16, and a seq whose padded
        // columns (24) take one vector of 16 then one of 8.
        (1, 20, 2, 1, 24),
        (1, 12, 2, 2, 40),
        (1, 5, 1, 1, 48),
        (2, 128, 6, 3, 32),
    ] {
        let s = AttentionShape {
            batch,
            seq,
            heads,
            kv_heads,
            head_dim,
        };
        let (q, k, v) = (
            values(s.q_len(), 1),
            values(s.kv_len(), 2),
            values(s.kv_len(), 3),
        );
        let dout = values(s.q_len(), 4);
        let (mut o1, mut p1) = (vec![0.0; s.q_len()], vec![0.0; s.probs_len()]);
        let (mut o2, mut p2) = (vec![9.0; s.q_len()], vec![9.0; s.probs_len()]);
        reference::attention(&q, &k, &v, &mut o1, &mut p1, s);
        attention(&q, &k, &v, &mut o2, &mut p2, s);
        assert_eq!(bits(&o1), bits(&o2), "out {s:?}");
        assert_eq!(bits(&p1), bits(&p2), "probs {s:?}");
        let mut a = [
            vec![0.0; s.probs_len()],
            vec![0.0; s.q_len()],
            vec![0.0; s.kv_len()],
            vec![0.0; s.kv_len()],
        ];
        let mut b = [
            vec![7.0; s.probs_len()],
            vec![7.0; s.q_len()],
            vec![7.0; s.kv_len()],
            vec![7.0; s.kv_len()],
        ];
        fn grads(x: &mut [Vec<f32>; 4]) -> AttentionGrads<'_> {
            let [ds, dq, dk, dv] = x;
            AttentionGrads {
                dscores: ds,
                dq,
                dk,
                dv,
            }
        }
        reference::attention_backward(&q, &k, &v, &p1, &dout, grads(&mut a), s);
        attention_backward(&q, &k, &v, &p1, &dout, grads(&mut b), s);
        for (x, y) in a.iter().zip(&b) {
            assert_eq!(bits(x), bits(y), "backward {s:?}");
        }
    }
}
