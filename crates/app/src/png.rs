//! Plot exports as PNG: crop the window's screenshot to a panel's rectangle and encode it.

use eframe::egui::{self, ColorImage};

/// The part of `image` (a screenshot at `pixels_per_point`) under `rect` (points), clamped
/// to the image.
pub fn crop(image: &ColorImage, rect: egui::Rect, pixels_per_point: f32) -> ColorImage {
    let [w, h] = image.size;
    let clamp = |v: f32, max: usize| (v * pixels_per_point).round().clamp(0.0, max as f32) as usize;
    let (x0, x1) = (clamp(rect.min.x, w), clamp(rect.max.x, w));
    let (y0, y1) = (clamp(rect.min.y, h), clamp(rect.max.y, h));
    let (cw, ch) = (x1.saturating_sub(x0), y1.saturating_sub(y0));
    let mut pixels = Vec::with_capacity(cw * ch);
    for y in y0..y0 + ch {
        pixels.extend_from_slice(&image.pixels[y * w + x0..y * w + x0 + cw]);
    }
    ColorImage::new([cw, ch], pixels)
}

/// Encodes an image as an 8-bit RGBA PNG.
pub fn encode(image: &ColorImage) -> Result<Vec<u8>, String> {
    let [w, h] = image.size;
    if w == 0 || h == 0 {
        return Err("empty region".into());
    }
    let mut out = Vec::new();
    let mut enc = png::Encoder::new(&mut out, w as u32, h as u32);
    enc.set_color(png::ColorType::Rgba);
    enc.set_depth(png::BitDepth::Eight);
    let mut writer = enc.write_header().map_err(|e| e.to_string())?;
    let bytes: Vec<u8> = image
        .pixels
        .iter()
        .flat_map(|c| c.to_srgba_unmultiplied())
        .collect();
    writer.write_image_data(&bytes).map_err(|e| e.to_string())?;
    writer.finish().map_err(|e| e.to_string())?;
    Ok(out)
}

/// PNG exports: what the panels asked for this frame, the request waiting for its
/// screenshot, and where the screenshot arrives.
#[derive(Default)]
pub struct PngExports {
    /// PNG exports the panels asked for.
    pub exports: crate::charts::Exports,
    /// A PNG export waiting for its screenshot: file name and the region (points).
    pub request: Option<(String, egui::Rect)>,
    /// Where the screenshot for `request` arrives.
    pub(crate) shot: std::sync::Arc<std::sync::Mutex<Option<std::sync::Arc<ColorImage>>>>,
    /// See [`crate::Options::png_after`].
    pub after: Option<String>,
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]
    use super::*;

    #[test]
    fn crop_and_encode_round_trip() {
        let (w, h) = (40usize, 30usize);
        let pixels = (0..w * h)
            .map(|i| egui::Color32::from_rgb((i % w) as u8, (i / w) as u8, 7))
            .collect();
        let image = ColorImage::new([w, h], pixels);
        // Points at 2 px per point: (5,4)–(15,10) → pixels (10,8)–(30,20).
        let rect = egui::Rect::from_min_max(egui::pos2(5.0, 4.0), egui::pos2(15.0, 10.0));
        let c = crop(&image, rect, 2.0);
        assert_eq!(c.size, [20, 12]);
        assert_eq!(c.pixels[0], egui::Color32::from_rgb(10, 8, 7));
        let bytes = encode(&c).unwrap();
        let decoder = png::Decoder::new(std::io::Cursor::new(bytes));
        let mut reader = decoder.read_info().unwrap();
        let mut buf = vec![0; reader.output_buffer_size().unwrap()];
        let info = reader.next_frame(&mut buf).unwrap();
        assert_eq!((info.width, info.height), (20, 12));
        // Last pixel: x = 29, y = 19.
        assert_eq!(&buf[buf.len() - 4..], &[29, 19, 7, 255]);
        // Off-image rectangles are clamped; an empty one is an error, not a panic.
        let off = egui::Rect::from_min_max(egui::pos2(100.0, 100.0), egui::pos2(200.0, 200.0));
        assert!(encode(&crop(&image, off, 1.0)).is_err());
    }
}
