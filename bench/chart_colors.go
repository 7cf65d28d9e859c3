package main

import (
	"hash/fnv"
	"image/color"
	"strings"
)

// contenderColors give each contender of the chart one colour in every panel: greys for the
// references, blues and greens for rlock's mutexes, purples for its read-write mutexes, olive
// for its semaphore, warm colours for the other libraries.
var contenderColors = map[string]color.RGBA{
	"ping":                {R: 190, G: 190, B: 190, A: 255},
	"baseline":            {R: 110, G: 110, B: 110, A: 255},
	"floor":               {R: 150, G: 140, B: 110, A: 255},
	"floor-spublish":      {R: 195, G: 185, B: 150, A: 255},
	"rlock-pubsub":        {R: 31, G: 119, B: 180, A: 255},
	"rlock-nodeadline":    {R: 70, G: 90, B: 150, A: 255},
	"rlock-spin10ms":      {R: 100, G: 160, B: 215, A: 255},
	"rlock-spin100ms":     {R: 160, G: 195, B: 230, A: 255},
	"rlock-fair":          {R: 44, G: 150, B: 44, A: 255},
	"rlock-rw":            {R: 130, G: 90, B: 180, A: 255},
	"rlock-rw-write":      {R: 130, G: 90, B: 180, A: 255},
	"rlock-rw-read":       {R: 190, G: 165, B: 215, A: 255},
	"rlock-rw-fair":       {R: 20, G: 160, B: 170, A: 255},
	"rlock-rw-fair-write": {R: 20, G: 160, B: 170, A: 255},
	"rlock-rw-fair-read":  {R: 140, G: 210, B: 215, A: 255},
	"rlock-sem":           {R: 170, G: 170, B: 30, A: 255},
	"rlock-sem-1":         {R: 170, G: 170, B: 30, A: 255},
	"rueidislock":         {R: 255, G: 127, B: 14, A: 255},
	"redsync":             {R: 214, G: 39, B: 40, A: 255},
	"redislock":           {R: 140, G: 86, B: 75, A: 255},
}

// otherColors are for contenders contenderColors does not name, chosen by their id.
var otherColors = []color.RGBA{
	{R: 227, G: 119, B: 194, A: 255},
	{R: 188, G: 80, B: 144, A: 255},
	{R: 255, G: 187, B: 120, A: 255},
	{R: 120, G: 60, B: 30, A: 255},
}

// contenderColor returns the colour of the contender with id: its own, rlock Mutex's for the
// rows of the scale scenarios ("holds-1000", "waiters"), which are rlock Mutexes, or one of
// otherColors by a hash of the id.
func contenderColor(id string) color.RGBA {
	if c, ok := contenderColors[id]; ok {
		return c
	}
	if strings.HasPrefix(id, "holds-") || id == "waiters" {
		return contenderColors["rlock-pubsub"]
	}
	h := fnv.New32a()
	h.Write([]byte(id))
	return otherColors[h.Sum32()%uint32(len(otherColors))]
}
