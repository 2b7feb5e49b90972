package main

import (
	"fmt"
	"html"
	"math"
	"sort"
	"strings"
)

// point is one measurement: x (a policy count) and y.
type point struct{ x, y float64 }

// series is a named line of points.
type series struct {
	name   string
	points []point
}

// Plot geometry, in SVG user units.
const (
	plotW, plotH                 = 560, 300
	padL, padR, padTop, padBelow = 64, 190, 30, 44
)

var palette = []string{"#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"}

// svgPlot draws ss as lines against a logarithmic x axis (x <= 0 is drawn
// at 1) and a linear y axis from 0, with a legend on the right.
func svgPlot(title, xlabel, ylabel string, ss []series) string {
	minX, maxX, maxY := math.Inf(1), math.Inf(-1), 0.0
	for _, s := range ss {
		for _, p := range s.points {
			x := math.Log10(math.Max(p.x, 1))
			minX, maxX, maxY = math.Min(minX, x), math.Max(maxX, x), math.Max(maxY, p.y)
		}
	}
	if math.IsInf(minX, 1) {
		minX, maxX = 0, 1
	}
	minX, maxX = math.Floor(minX), math.Max(math.Ceil(maxX), math.Floor(minX)+1)
	maxY = niceCeil(maxY)
	w, h := float64(plotW-padL-padR), float64(plotH-padTop-padBelow)
	px := func(x float64) float64 { return padL + (math.Log10(math.Max(x, 1))-minX)/(maxX-minX)*w }
	py := func(y float64) float64 { return padTop + h - y/maxY*h }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%d" height="%d" viewBox="0 0 %d %d" font-family="sans-serif" font-size="11">`+"\n", plotW, plotH, plotW, plotH)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/><text x="%d" y="18" font-size="13">%s</text>`+"\n", padL, html.EscapeString(title))
	for i := 0; i <= 4; i++ {
		y := maxY * float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%d" x2="%.0f" y1="%.1f" y2="%.1f" stroke="#ddd"/><text x="%d" y="%.1f" text-anchor="end">%s</text>`+"\n", padL, padL+w, py(y), py(y), padL-4, py(y)+4, trim(y))
	}
	for e := minX; e <= maxX; e++ {
		x := math.Pow(10, e)
		fmt.Fprintf(&b, `<line x1="%.1f" x2="%.1f" y1="%d" y2="%.0f" stroke="#ddd"/><text x="%.1f" y="%.0f" text-anchor="middle">%s</text>`+"\n", px(x), px(x), padTop, padTop+h, px(x), padTop+h+14, trim(x))
	}
	fmt.Fprintf(&b, `<text x="%.0f" y="%d" text-anchor="middle">%s</text>`+"\n", padL+w/2, plotH-8, html.EscapeString(xlabel))
	fmt.Fprintf(&b, `<text transform="translate(14 %.0f) rotate(-90)" text-anchor="middle">%s</text>`+"\n", padTop+h/2, html.EscapeString(ylabel))
	for i, s := range ss {
		color := palette[i%len(palette)]
		pts := append([]point(nil), s.points...)
		sort.Slice(pts, func(a, b int) bool { return pts[a].x < pts[b].x })
		var path []string
		for _, p := range pts {
			path = append(path, fmt.Sprintf("%.1f,%.1f", px(p.x), py(p.y)))
			fmt.Fprintf(&b, `<circle cx="%.1f" cy="%.1f" r="2.5" fill="%s"/>`+"\n", px(p.x), py(p.y), color)
		}
		fmt.Fprintf(&b, `<polyline points="%s" fill="none" stroke="%s" stroke-width="1.5"/>`+"\n", strings.Join(path, " "), color)
		ly := padTop + 14*i
		fmt.Fprintf(&b, `<line x1="%.0f" x2="%.0f" y1="%d" y2="%d" stroke="%s" stroke-width="2"/><text x="%.0f" y="%d">%s</text>`+"\n",
			padL+w+10, padL+w+28, ly, ly, color, padL+w+32, ly+4, html.EscapeString(s.name))
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds v up to 1, 2 or 5 times a power of ten (1 for v <= 0).
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}

// trim formats a tick value without needless decimals.
func trim(v float64) string {
	if v >= 1000 && math.Mod(v, 1000) == 0 {
		return fmt.Sprintf("%gk", v/1000)
	}
	return strings.TrimSuffix(strings.TrimRight(fmt.Sprintf("%.2f", v), "0"), ".")
}
