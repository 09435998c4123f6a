//! Convolution and pooling windows: their geometry read from an op's attributes, once,
//! for the shape check here and for the kernels that run them.

use super::AttrReader;
use crate::types::{Attrs, shape_str};

/// 2-D window geometry shared by convolution and pooling.
#[derive(Debug, Clone, Copy)]
pub struct Window {
    pub kernel: [u64; 2],
    pub stride: [u64; 2],
    pub padding: [u64; 2],
    pub dilation: [u64; 2],
}

impl Window {
    /// A convolution's window over a `kernel` (the filter's height and width): stride,
    /// padding and dilation as the attributes give them.
    pub fn conv(attrs: &Attrs, kernel: [u64; 2]) -> Result<Window, String> {
        let attrs = AttrReader(attrs);
        Window {
            kernel,
            stride: attrs.pair("stride", [1, 1])?,
            padding: attrs.pair("padding", [0, 0])?,
            dilation: attrs.pair("dilation", [1, 1])?,
        }
        .checked()
    }

    /// A pooling op's window: its kernel, a stride of the kernel unless given, padding of
    /// at most half the window.
    pub fn pooling(attrs: &Attrs) -> Result<Window, String> {
        let attrs = AttrReader(attrs);
        let kernel = attrs.pair("kernel", [1, 1])?;
        let w = Window {
            kernel,
            stride: attrs.pair("stride", kernel)?,
            padding: attrs.pair("padding", [0, 0])?,
            dilation: [1, 1],
        }
        .checked()?;
        if w.padding[0] * 2 > w.kernel[0] || w.padding[1] * 2 > w.kernel[1] {
            return Err(format!("padding {:?} is more than half the pooling window {:?}", w.padding, w.kernel));
        }
        Ok(w)
    }

    fn checked(self) -> Result<Window, String> {
        if self.kernel.contains(&0) || self.stride.contains(&0) || self.dilation.contains(&0) {
            return Err(format!(
                "kernel {:?}, stride {:?} and dilation {:?} must all be positive",
                self.kernel, self.stride, self.dilation
            ));
        }
        Ok(self)
    }

    /// Output height and width for an input of `hw`, or why the window does not fit.
    pub fn output_hw(&self, hw: [u64; 2]) -> Result<[u64; 2], String> {
        let mut out = [0; 2];
        for i in 0..2 {
            // Attributes come from the file, so the arithmetic must not overflow.
            let span =
                (self.kernel[i] - 1).checked_mul(self.dilation[i]).and_then(|s| s.checked_add(1)).ok_or_else(|| {
                    format!(
                        "kernel {} with dilation {} spans more than 2^64 elements",
                        self.kernel[i], self.dilation[i]
                    )
                })?;
            let padded = self.padding[i]
                .checked_mul(2)
                .and_then(|p| p.checked_add(hw[i]))
                .ok_or_else(|| format!("padding {} is too large", self.padding[i]))?;
            if span > padded {
                return Err(format!(
                    "window of {span} does not fit an input of {} with padding {}",
                    hw[i], self.padding[i]
                ));
            }
            out[i] = (padded - span) / self.stride[i] + 1;
        }
        Ok(out)
    }
}

/// The output shape of a forward convolution of `x` with filter `w`.
pub fn conv_output_shape(attrs: &Attrs, x: &[u64], w: &[u64]) -> Result<Vec<u64>, String> {
    if x.len() != 4 || w.len() != 4 {
        return Err(format!(
            "convolution needs a 4-D input [N, C, H, W] and a 4-D filter [K, C/groups, R, S], got {} and {}",
            shape_str(x),
            shape_str(w)
        ));
    }
    let groups = AttrReader(attrs).int("groups", 1);
    if groups < 1 {
        return Err(format!("groups must be at least 1, got {groups}"));
    }
    let g = groups as u64;
    if !x[1].is_multiple_of(g) || !w[0].is_multiple_of(g) || x[1] / g != w[1] {
        return Err(format!(
            "input {} and filter {} do not agree on channels with {g} group(s)",
            shape_str(x),
            shape_str(w)
        ));
    }
    let window = Window::conv(attrs, [w[2], w[3]])?;
    let [p, q] = window.output_hw([x[2], x[3]])?;
    Ok(vec![x[0], w[0], p, q])
}

/// The output shape of a pooling op over `x`.
pub fn pooling_output_shape(attrs: &Attrs, x: &[u64]) -> Result<Vec<u64>, String> {
    if x.len() != 4 {
        return Err(format!("pooling needs a 4-D input [N, C, H, W], got {}", shape_str(x)));
    }
    let [p, q] = Window::pooling(attrs)?.output_hw([x[2], x[3]])?;
    Ok(vec![x[0], x[1], p, q])
}
