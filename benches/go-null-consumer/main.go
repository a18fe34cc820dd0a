// The peer of `cargo bench --bench ingest`: Google's Go Pub/Sub client as a
// null consumer. It acks every delivery at once and stores nothing, with
// NumGoroutines streaming pulls, and reports what it acked on stdout so the
// bench can time it against postfach on the same emulator in the same run.
//
// Output, one line about every 5 ms while something changed:
//
//	acked N c1 c2 ... ck
//
// where ci is the cumulative count of acks whose publish→ack latency was at
// most the i-th bound given with -bounds (seconds, comma separated).
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"os/signal"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"cloud.google.com/go/pubsub/v2"
)

func main() {
	project := flag.String("project", "postfach-bench", "project of the subscription")
	subscription := flag.String("subscription", "", "subscription id")
	streams := flag.Int("streams", 1, "streaming pulls (ReceiveSettings.NumGoroutines)")
	outstanding := flag.Int("max-outstanding", 1000, "ReceiveSettings.MaxOutstandingMessages")
	boundsFlag := flag.String("bounds", "", "latency bucket bounds in seconds, comma separated")
	flag.Parse()
	if *subscription == "" || os.Getenv("PUBSUB_EMULATOR_HOST") == "" {
		log.Fatal("usage: PUBSUB_EMULATOR_HOST=host:port go-null-consumer -subscription S [-streams N]")
	}
	var bounds []float64
	for _, b := range strings.Split(*boundsFlag, ",") {
		if b = strings.TrimSpace(b); b == "" {
			continue
		}
		v, err := strconv.ParseFloat(b, 64)
		if err != nil {
			log.Fatalf("-bounds: %q is not a number", b)
		}
		bounds = append(bounds, v)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	client, err := pubsub.NewClient(ctx, *project)
	if err != nil {
		log.Fatalf("pubsub.NewClient: %v", err)
	}
	defer client.Close()
	sub := client.Subscriber(*subscription)
	sub.ReceiveSettings.NumGoroutines = *streams
	sub.ReceiveSettings.MaxOutstandingMessages = *outstanding

	var acked atomic.Uint64
	var mu sync.Mutex
	perBucket := make([]uint64, len(bounds))
	go func() {
		last := uint64(0)
		for {
			select {
			case <-ctx.Done():
				return
			case <-time.After(5 * time.Millisecond):
			}
			n := acked.Load()
			if n == last {
				continue
			}
			last = n
			mu.Lock()
			line := fmt.Sprintf("acked %d", n)
			sum := uint64(0)
			for _, c := range perBucket {
				sum += c
				line += fmt.Sprintf(" %d", sum)
			}
			mu.Unlock()
			fmt.Println(line)
		}
	}()
	err = sub.Receive(ctx, func(_ context.Context, m *pubsub.Message) {
		m.Ack()
		latency := time.Since(m.PublishTime).Seconds()
		if i := sort.SearchFloat64s(bounds, latency); i < len(bounds) {
			mu.Lock()
			perBucket[i]++
			mu.Unlock()
		}
		acked.Add(1)
	})
	if err != nil && ctx.Err() == nil {
		log.Fatalf("Receive: %v", err)
	}
}
