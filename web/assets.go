package web

import "embed"

// assets are the live view's files: plain HTML, CSS and JavaScript, no
// build step.
//
//go:embed assets
var assets embed.FS
