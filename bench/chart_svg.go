package main

import (
	"bytes"
	"html"
	"regexp"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/vg"
)

// anchor is how a text of the chart is aligned on the point it belongs to.
type anchor string

const (
	anchorMiddle anchor = "middle" // centred: titles, axis labels
	anchorEnd    anchor = "end"    // right-aligned: contender names left of their bars
)

// textKey names a text of the chart: its content and its font size in points (a contender's
// name is a right-aligned tick label at one size and a left-aligned legend entry at another).
type textKey struct {
	text string
	size float64
}

// textAnchors returns the texts of plots that are not left-aligned: the titles and axis labels
// (centred) and the contender names of the bar panels (right-aligned).
func textAnchors(plots []*plot.Plot) map[textKey]anchor {
	anchors := map[textKey]anchor{}
	for _, p := range plots {
		for _, line := range strings.Split(p.Title.Text, "\n") { // drawn line by line
			anchors[textKey{line, p.Title.TextStyle.Font.Size.Points()}] = anchorMiddle
		}
		anchors[textKey{p.X.Label.Text, p.X.Label.TextStyle.Font.Size.Points()}] = anchorMiddle
		anchors[textKey{p.Y.Label.Text, p.Y.Label.TextStyle.Font.Size.Points()}] = anchorMiddle
		if _, nominal := p.Y.Tick.Marker.(plot.ConstantTicks); nominal {
			for _, t := range p.Y.Tick.Marker.Ticks(p.Y.Min, p.Y.Max) {
				anchors[textKey{t.Label, p.Y.Tick.Label.Font.Size.Points()}] = anchorEnd
			}
		}
	}
	return anchors
}

// svgText matches a text element as vgsvg writes it: x, y, style (with the font size) and the
// escaped text.
var svgText = regexp.MustCompile(`<text x="([^"]+)"( y="[^"]+" transform="scale\(1, -1\)"\s*style="[^"]*font-size:([0-9.]+)px[^"]*")>([^<]*)</text>`)

// anchorText rewrites the SVG's text elements that anchors names so that they are anchored
// where the layout put their middle or end, with text-anchor, rather than at a start computed
// from the width of the font the chart was laid out with: a viewer that draws them in another
// font (wider or narrower) keeps names right of their bars' axis and titles centred over
// their panels.
func anchorText(svg []byte, anchors map[textKey]anchor) []byte {
	return svgText.ReplaceAllFunc(svg, func(elem []byte) []byte {
		m := svgText.FindSubmatch(elem)
		size, err := strconv.ParseFloat(string(m[3]), 64)
		if err != nil {
			return elem
		}
		text := html.UnescapeString(string(m[4]))
		a, ok := anchors[textKey{text, size}]
		if !ok {
			return elem
		}
		x, err := strconv.ParseFloat(string(m[1]), 64)
		if err != nil {
			return elem
		}
		face := plot.DefaultTextHandler.Cache().Lookup(plot.DefaultFont, vg.Points(size))
		width := face.Width(text).Points()
		if a == anchorMiddle {
			width /= 2
		}
		var b bytes.Buffer
		b.WriteString(`<text x="`)
		b.WriteString(strconv.FormatFloat(x+width, 'g', 5, 64))
		b.WriteString(`" text-anchor="` + string(a) + `"`)
		b.Write(m[2])
		b.WriteString(">")
		b.Write(m[4])
		b.WriteString("</text>")
		return b.Bytes()
	})
}
