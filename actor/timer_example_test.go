package actor_test

import (
	"context"
	"fmt"
	"time"

	"github.com/effectors/effectors/actor"
	"github.com/effectors/effectors/records"
)

// Order is the state of an order that expires unless paid.
type Order struct {
	Paid    bool `json:"paid"`
	Expired bool `json:"expired"`
}

// ExampleContext_After sets a timer when an order is placed and cancels it
// when it is paid. Kind.Apply shows what a node publishes once the logic
// succeeded: the timer's schedule on the timer stream, which fires an
// "expire" record into the order's mailbox in 30 minutes unless cancelled.
func ExampleContext_After() {
	order := actor.Kind[Order]{
		Name: "order",
		Logic: func(ctx *actor.Context, s Order) (Order, error) {
			switch ctx.Record().Type {
			case "placed":
				_, err := ctx.After(30*time.Minute, "expire", nil, actor.Named("expiry"))
				return s, err
			case "paid":
				s.Paid = true
				return s, ctx.CancelTimer("expiry")
			case "expire":
				s.Expired = !s.Paid
			}
			return s, nil
		},
	}
	self := records.Ref{Kind: "order", ID: "o1"}
	for _, typ := range []string{"placed", "paid"} {
		_, outs, err := order.Apply(context.Background(), self, records.Record{Type: typ}, Order{})
		if err != nil {
			fmt.Println(err)
			return
		}
		for _, o := range outs {
			fmt.Println(typ, "->", o.Subject, o.Record.Type)
		}
	}
	// Output:
	// placed -> ea.timer.set.order.o1.expiry expire
	// paid -> ea.timer.set.order.o1.expiry timer-cancel
}
