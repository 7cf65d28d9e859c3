package rlockotel_test

import (
	"context"
	"log"
	"os"
	"strings"

	"github.com/redis/rueidis"
	"github.com/redis/rueidis/rueidisotel"
	"github.com/rlock-go/rlock"
	rlockotel "github.com/rlock-go/rlock/otel"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Example sets up metrics and tracing for a Client. The providers stand for the application's
// own (with their exporters); without WithMeterProvider and WithTracerProvider, the global
// ones are used. Wrapping the rueidis client with rueidisotel is optional: it adds a span per
// Redis command, which nests under the rlock.Lock and rlock.Unlock spans.
func Example() {
	ctx := context.Background()
	mp := sdkmetric.NewMeterProvider( /* sdkmetric.WithReader(your exporter's reader) */ )
	defer mp.Shutdown(ctx)
	tp := sdktrace.NewTracerProvider( /* sdktrace.WithBatcher(your exporter) */ )
	defer tp.Shutdown(ctx)

	rc, err := rueidisotel.NewClient(rueidis.ClientOption{InitAddress: []string{os.Getenv("REDIS_ADDR")}},
		rueidisotel.WithTracerProvider(tp), rueidisotel.WithMeterProvider(mp))
	if err != nil {
		log.Fatal(err)
	}
	defer rc.Close()
	locks, err := rlock.New(rc, rlock.Options{Observer: rlockotel.New(
		rlockotel.WithMeterProvider(mp),
		rlockotel.WithTracerProvider(tp),
		// "invoice:42" is recorded as "invoice": one time series per family, not per invoice.
		rlockotel.WithLockNames(func(name string) string { family, _, _ := strings.Cut(name, ":"); return family }),
	)})
	if err != nil {
		log.Fatal(err)
	}
	defer locks.Close()

	ctx, span := tp.Tracer("billing").Start(ctx, "charge invoice")
	defer span.End()
	m := locks.NewMutex("invoice:42")
	held, err := m.Lock(ctx) // span "rlock.Lock" under "charge invoice"; wait recorded
	if err != nil {
		log.Fatal(err)
	}
	// ... the critical section, under held ...
	if err := m.Unlock(held); err != nil { // span "rlock.Unlock"; hold time recorded
		log.Fatal(err)
	}
}
