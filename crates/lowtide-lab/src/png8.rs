//! Plots written as palette PNGs (8 bits a pixel): a chart has few colours (its
//! series', the grid's greys and their anti-aliased blends), so its 256 most
//! frequent colours, each other pixel mapped to the nearest of them, look the same
//! at a third of the RGB file's size: small enough to keep in the repository.

use std::collections::HashMap;
use std::path::Path;

/// Writes `rgb` (`w` x `h` pixels, 3 bytes each) to `path` as a palette PNG.
pub fn write(path: &Path, rgb: &[u8], (w, h): (u32, u32)) -> Result<(), String> {
    let err = |e: &dyn std::fmt::Display| format!("{}: {e}", path.display());
    let (palette, index) = quantize(rgb);
    let file = std::fs::File::create(path).map_err(|e| err(&e))?;
    let mut enc = png::Encoder::new(std::io::BufWriter::new(file), w, h);
    enc.set_color(png::ColorType::Indexed);
    enc.set_depth(png::BitDepth::Eight);
    enc.set_palette(palette.iter().flatten().copied().collect::<Vec<u8>>());
    enc.set_compression(png::Compression::Best);
    let mut writer = enc.write_header().map_err(|e| err(&e))?;
    writer.write_image_data(&index).map_err(|e| err(&e))
}

/// The image's palette (at most 256 colours: the most frequent) and each pixel's
/// index in it (its colour's, else the nearest one's).
fn quantize(rgb: &[u8]) -> (Vec<[u8; 3]>, Vec<u8>) {
    let px = |c: &[u8]| [c[0], c[1], c[2]];
    let mut count: HashMap<[u8; 3], u64> = HashMap::new();
    for c in rgb.chunks_exact(3) {
        *count.entry(px(c)).or_default() += 1;
    }
    let mut by_freq: Vec<([u8; 3], u64)> = count.into_iter().collect();
    // Most frequent first; ties by colour, so the file is the same every time.
    by_freq.sort_by(|a, b| b.1.cmp(&a.1).then(a.0.cmp(&b.0)));
    let palette: Vec<[u8; 3]> = by_freq.iter().take(256).map(|(c, _)| *c).collect();
    let mut slot: HashMap<[u8; 3], u8> = HashMap::new();
    let index = (rgb.chunks_exact(3))
        .map(|c| {
            let c = px(c);
            *slot.entry(c).or_insert_with(|| nearest(&palette, c))
        })
        .collect();
    (palette, index)
}

/// The index of the palette colour nearest `c` (squared RGB distance).
fn nearest(palette: &[[u8; 3]], c: [u8; 3]) -> u8 {
    let d = |p: &[u8; 3]| -> i32 { (0..3).map(|k| (p[k] as i32 - c[k] as i32).pow(2)).sum() };
    (palette.iter().enumerate())
        .min_by_key(|(_, p)| d(p))
        .map_or(0, |(i, _)| i as u8)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn few_colours_are_kept_exactly_and_the_rest_go_to_the_nearest() {
        // 300 pixels of white, 2 of red, one of nearly red, then 255 one-off greys:
        // 258 colours, so the two rarest (greys) map to their nearest neighbours.
        let mut rgb = Vec::new();
        for _ in 0..300 {
            rgb.extend([255, 255, 255]);
        }
        rgb.extend([214, 39, 40, 214, 39, 40, 210, 40, 40]);
        for g in 0..255u8 {
            rgb.extend([g, g, g]);
        }
        let (palette, index) = quantize(&rgb);
        assert_eq!(palette.len(), 256);
        assert_eq!(palette[index[0] as usize], [255, 255, 255]);
        assert_eq!(palette[index[300] as usize], [214, 39, 40]);
        let last = palette[index[index.len() - 1] as usize];
        assert!(last[0].abs_diff(254) <= 1, "{last:?}");
    }
}
