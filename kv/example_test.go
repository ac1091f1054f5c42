package kv_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"os"

	"github.com/effectors/effectors/bus"
	"github.com/effectors/effectors/kv"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
)

// Account is the state kept per key.
type Account struct {
	Owner   string `json:"owner"`
	Balance int    `json:"balance"`
}

// startJetStream starts an embedded server with a bucket "accounts" keeping
// 5 revisions per key, and returns a JetStream handle and a function that
// stops it all.
func startJetStream(ctx context.Context) (jetstream.JetStream, func(), error) {
	dir, err := os.MkdirTemp("", "kv-example")
	if err != nil {
		return nil, nil, err
	}
	srv, err := bus.StartServer(bus.ServerConfig{Listen: "127.0.0.1:0", StoreDir: dir})
	if err != nil {
		return nil, nil, err
	}
	stop := func() {
		srv.Shutdown()
		_ = os.RemoveAll(dir)
	}
	nc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		stop()
		return nil, nil, err
	}
	stop = func() {
		nc.Close()
		srv.Shutdown()
		_ = os.RemoveAll(dir)
	}
	js, err := jetstream.New(nc)
	if err == nil {
		_, err = js.CreateKeyValue(ctx, jetstream.KeyValueConfig{Bucket: "accounts", History: 5})
	}
	if err != nil {
		stop()
		return nil, nil, err
	}
	return js, stop, nil
}

func Example() {
	ctx := context.Background()
	js, stop, err := startJetStream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer stop()

	accounts, err := kv.Open[Account](ctx, js, "accounts")
	if err != nil {
		log.Fatal(err)
	}

	// Create writes only if the key has no value.
	rev, err := accounts.Create(ctx, "acct.alice", Account{Owner: "alice", Balance: 100})
	if err != nil {
		log.Fatal(err)
	}
	_, err = accounts.Create(ctx, "acct.alice", Account{Owner: "mallory"})
	fmt.Println("create again:", errors.Is(err, kv.ErrExists))

	// Update is a compare-and-set on the revision we hold.
	next, err := accounts.Update(ctx, "acct.alice", Account{Owner: "alice", Balance: 150}, rev)
	if err != nil {
		log.Fatal(err)
	}
	_, err = accounts.Update(ctx, "acct.alice", Account{Owner: "alice", Balance: 999}, rev) // stale
	fmt.Println("stale update:", errors.Is(err, kv.ErrConflict))

	// Modify reads, applies the function and compare-and-sets, retrying on
	// conflicts.
	e, err := accounts.Modify(ctx, "acct.alice", func(a Account) (Account, error) {
		a.Balance -= 30
		return a, nil
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println("balance:", e.Value.Balance, "newer:", e.Revision > next)

	history, err := accounts.History(ctx, "acct.alice")
	if err != nil {
		log.Fatal(err)
	}
	for _, h := range history {
		fmt.Println("history:", h.Value.Balance)
	}

	if err := accounts.Delete(ctx, "acct.alice"); err != nil {
		log.Fatal(err)
	}
	_, err = accounts.Get(ctx, "acct.alice")
	fmt.Println("after delete:", errors.Is(err, kv.ErrNotFound))
	// Output:
	// create again: true
	// stale update: true
	// balance: 120 newer: true
	// history: 100
	// history: 150
	// history: 120
	// after delete: true
}

func ExampleStore_Watch() {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	js, stop, err := startJetStream(ctx)
	if err != nil {
		log.Fatal(err)
	}
	defer stop()
	accounts, err := kv.Open[Account](ctx, js, "accounts")
	if err != nil {
		log.Fatal(err)
	}
	if _, err := accounts.Put(ctx, "acct.alice", Account{Owner: "alice", Balance: 100}); err != nil {
		log.Fatal(err)
	}

	// The watch yields the current value, then every change, until ctx is
	// done or the loop breaks.
	seen := 0
	for e, err := range accounts.Watch(ctx, "acct.*") {
		if err != nil {
			log.Fatal(err)
		}
		if e.Deleted {
			fmt.Println(e.Key, "deleted")
		} else {
			fmt.Println(e.Key, e.Value.Balance)
		}
		switch seen++; seen {
		case 1: // the initial value: make changes
			if _, err := accounts.Put(ctx, "acct.bob", Account{Owner: "bob", Balance: 5}); err != nil {
				log.Fatal(err)
			}
			if err := accounts.Delete(ctx, "acct.alice"); err != nil {
				log.Fatal(err)
			}
		case 3:
			cancel() // ends the loop without an error
		}
	}
	// Output:
	// acct.alice 100
	// acct.bob 5
	// acct.alice deleted
}
