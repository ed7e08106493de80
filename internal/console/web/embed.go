// Package web holds the console's browser app: index.html, app.js and
// app.css, plain JavaScript with no framework, no build step and no
// third-party code, embedded in the daemons so the console needs nothing
// more to deploy and no network access beyond its own API.
//
// The app talks only to the console's JSON API under /console/api (see
// package internal/console for the wire format). Pages are hash routes:
// #/cluster, #/topics, #/topics/{topic}, #/groups, #/groups/{group},
// #/messages, #/messages/{id}, #/dlq, #/dlq/{group} and #/delay. Each page
// polls its data every few seconds while the browser tab is visible; live
// charts are built from the deltas between polls and are kept in memory
// only while the page is open.
//
// When a table has been rendered for the first time after the page was
// loaded, the app records a performance mark named "bolide:<table>-table"
// (for example "bolide:topics-table") once the frame that lays it out and
// paints it is done; the browser tests read them to measure the time from
// navigation to a rendered table.
package web

import "embed"

// FS holds index.html, app.js and app.css at its root.
//
//go:embed index.html app.js app.css
var FS embed.FS
