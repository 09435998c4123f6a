//! Range add, range max over steps: how the baselines ask "does this tensor fit in this
//! pool over its whole live range" in O(log steps).

#[derive(Debug, Clone)]
pub(crate) struct MaxTree {
    n: usize,
    max: Vec<i128>,
    add: Vec<i128>,
}

impl MaxTree {
    pub(crate) fn new(n: usize) -> MaxTree {
        let n = n.max(1);
        MaxTree { n, max: vec![0; 4 * n], add: vec![0; 4 * n] }
    }

    /// Adds `v` to every step in `lo..=hi`.
    pub(crate) fn add(&mut self, lo: usize, hi: usize, v: i128) {
        self.update(1, 0, self.n - 1, lo, hi, v);
    }

    /// The largest value in `lo..=hi`.
    pub(crate) fn max(&self, lo: usize, hi: usize) -> i128 {
        self.query(1, 0, self.n - 1, lo, hi)
    }

    fn update(&mut self, node: usize, l: usize, r: usize, lo: usize, hi: usize, v: i128) {
        if hi < l || r < lo {
            return;
        }
        if lo <= l && r <= hi {
            self.max[node] += v;
            self.add[node] += v;
            return;
        }
        let mid = (l + r) / 2;
        self.update(2 * node, l, mid, lo, hi, v);
        self.update(2 * node + 1, mid + 1, r, lo, hi, v);
        self.max[node] = self.add[node] + self.max[2 * node].max(self.max[2 * node + 1]);
    }

    fn query(&self, node: usize, l: usize, r: usize, lo: usize, hi: usize) -> i128 {
        if hi < l || r < lo {
            return i128::MIN;
        }
        if lo <= l && r <= hi {
            return self.max[node];
        }
        let mid = (l + r) / 2;
        self.add[node] + self.query(2 * node, l, mid, lo, hi).max(self.query(2 * node + 1, mid + 1, r, lo, hi))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    proptest! {
        #[test]
        fn matches_a_plain_array(ops in proptest::collection::vec((0usize..40, 0usize..40, -100i64..100), 1..60)) {
            let mut tree = MaxTree::new(40);
            let mut plain = [0i128; 40];
            for (a, b, v) in ops {
                let (lo, hi) = (a.min(b), a.max(b));
                tree.add(lo, hi, i128::from(v));
                for x in &mut plain[lo..=hi] {
                    *x += i128::from(v);
                }
                let want = plain[lo..=hi].iter().copied().max().unwrap_or(i128::MIN);
                prop_assert_eq!(tree.max(lo, hi), want);
            }
        }
    }
}
