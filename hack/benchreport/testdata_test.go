package main

// sampleBench is go test -bench output in the shape the benchmarks print,
// two runs of the in-process ones, one of Redis's.
const sampleBench = `goos: linux
goarch: amd64
pkg: github.com/k8sratelimit/k8sratelimit/limiter
cpu: Some CPU
BenchmarkBudgetWait/serial-2         	10000000	       110.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkBudgetWait/parallel-2       	10000000	       140.0 ns/op	       0 deferred	       0 maxwait-ns	       0 B/op	       0 allocs/op
BenchmarkRateLimiterTryAccept/serial-2	 5000000	       240.0 ns/op	      64 B/op	       2 allocs/op
BenchmarkRateAllow/finite/serial-2   	10000000	        96.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkRateAllow/finite/parallel-2 	10000000	       140.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFlowcontrolTryAccept/serial-2	10000000	        96.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkFlowcontrolTryAccept/parallel-2	10000000	       140.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkAdmissionPaired-2           	10000000	       100.0 ns/op	        96.0 flowcontrol-ns/call	        95.0 rate-ns/call	       108.0 wait-ns/call	         1.125 wait/flowcontrol	         1.137 wait/rate	       0 B/op	       0 allocs/op
BenchmarkTransportOverhead/wrapped/serial-2	 5000000	       400.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkTransportGET/bare/serial-2  	   20000	     58000 ns/op	    5100 B/op	      62 allocs/op
BenchmarkTransportGET/wrapped/serial-2	   20000	     59000 ns/op	    5180 B/op	      63 allocs/op
BenchmarkTransportGETPaired/serial-2 	    5000	    180000 ns/op	     58000 bare-ns/GET	         1.000 control/bare	     60000 wrapped-ns/GET	         1.034 wrapped/bare	         1.034 wrapped/control	   15000 B/op	     187 allocs/op
PASS
ok  	github.com/k8sratelimit/k8sratelimit/limiter	10.0s
pkg: github.com/k8sratelimit/k8sratelimit/store/memorystore
BenchmarkMemoryReserve/window/serial-2	10000000	        90.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkAdmissionPaired-2           	10000000	       100.0 ns/op	        90.0 window-ns/call	        80.0 linear-ns/call	         0.95 window/rate	         0.94 window/flowcontrol	         0.84 linear/rate	         0.83 linear/flowcontrol	       0 B/op	       0 allocs/op
pkg: github.com/k8sratelimit/k8sratelimit/limiter
BenchmarkBudgetWait/serial-2         	10000000	       130.0 ns/op	       0 B/op	       0 allocs/op
BenchmarkAdmissionPaired-2           	10000000	       100.0 ns/op	       112.0 wait-ns/call	         1.175 wait/flowcontrol	         1.187 wait/rate	       0 B/op	       0 allocs/op
pkg: github.com/k8sratelimit/k8sratelimit/store/redisstore
BenchmarkRedisAdmission
BenchmarkRedisAdmission/window/1-budget/serial
BenchmarkRedisAdmission/window/1-budget/serial-2         	   30000	     40000 ns/op	        14.2 server-µs/op	     747 B/op	      12 allocs/op
BenchmarkRedisAdmission/redis_rate/1-budget/serial-2     	   30000	     35000 ns/op	        11.8 server-µs/op	     720 B/op	      22 allocs/op
BenchmarkRedisAdmissionPaired/1-budget-2 	   30000	     40000 ns/op	        1.12 window/redis_rate	         1.60 window/evalsha	         1.06 linear/redis_rate	         1.50 linear/evalsha
BenchmarkRedisMemory/window-400-per-minute-2	       1	 900000000 ns/op	      4811 B/budget	        12.03 B/send	         3.000 keys/budget
pkg: github.com/k8sratelimit/k8sratelimit
BenchmarkSeatsSharedThroughRedis-2   	    5000	   2000000 ns/op	         1.05 functions/op	        90.0 redis-cpu-µs/op
`

// sampleE2E is the end-to-end suite's -v output in the shape its tests
// log, shortened.
const sampleE2E = `=== RUN   TestAPFThrottlingWithAndWithoutLimiter
=== RUN   TestAPFThrottlingWithAndWithoutLimiter/without_limiter
    apf_test.go:175: sent 300 requests in 120ms, 230 answered 429
=== RUN   TestAPFThrottlingWithAndWithoutLimiter/with_limiter
=== NAME  TestAPFThrottlingWithAndWithoutLimiter
    apf_test.go:52: 
                                                   no limiter     k8sratelimit
        calls                                         300              300
        calls failed                                  230                0
        requests sent (incl. retries)                 300              302
        429s received                                 230                2
        duration                                    120ms           10.1s
--- PASS: TestAPFThrottlingWithAndWithoutLimiter (11.00s)
=== RUN   TestSeatsAgainstARejectingLevel
    seats_test.go:112: 3 workers (one per seat), no limiter: 9000 served, 0 of 9000 sent answered 429 (sent at:in flight []), concurrency limit at the end 0
    seats_test.go:232: a priority level of 3 seats that rejects, 15s per client, rate budget 10000 per second:
                                                                     served       sent       429s    limit
        3 workers (one per seat), no limiter                               18000      18000          0        0
        40 workers, k8sratelimit, concurrency auto                         16200      16202          2        3
        40 workers, k8sratelimit, concurrency off                             30        160        130        0
--- PASS: TestSeatsAgainstARejectingLevel (31.00s)
=== RUN   TestSeatsDefaultConfiguration
    seats_test.go:112: 40 workers, k8sratelimit, default configuration: 399 served, 1 of 400 sent answered 429 (sent at:in flight [0.01s:4]), concurrency limit at the end 3
--- PASS: TestSeatsDefaultConfiguration (30.00s)
=== RUN   TestSeatsAgainstAQueueingLevel
    seats_test.go:272: a priority level that queues, 15s per client:
                                                                     served       sent       429s    limit
        40 workers, no limiter                                             20000      20000          0        0
        40 workers, k8sratelimit, concurrency auto                         20040      20040          0        0
--- PASS: TestSeatsAgainstAQueueingLevel (30.00s)
=== RUN   TestSeatsSharedThroughRedis
    seats_test.go:362: e2e-seats-0: 7000 served, 1 of 7001 sent answered 429 (x; y)
    seats_test.go:427: two processes sharing a budget through Redis, a level of 3 seats that rejects:
                                                                     served       sent       429s    limit
        3 workers (one per seat), no limiter                               20000      20000          0        0
        3 workers over 2 processes (one per seat), no limiter              19500      19500          0        0
        2 processes × 20 workers, rate far above, concurrency auto         15000      15003          3        0
        2 processes × 20 workers, rate far above, concurrency 3 fixed      17550      17551          1        0
        2 processes × 20 workers, default configuration                      398        400          2        0
--- PASS: TestSeatsSharedThroughRedis (90.00s)
=== RUN   TestTrafficClassesUnderAStorm
    classes_test.go:73: reconciler alone: writes 599 of 599 served, p99 6.7ms; 1216 served, 0 of 1217 sent answered 429 []; events sent 0, refused 0; leadership lost: false
    classes_test.go:76: traffic classes: a priority level of 7 seats that rejects, a budget of 100 a second, 30s each:
        | run                  | writes served | write p50 | write p99 | write max | served  | 429s / sent  | events sent / refused |
        |---|---|---|---|---|---|---|---|
        | reconciler alone     | 599 of 599    | 3ms       | 7ms       | 20ms      | 1216    | 0 / 1217     | 0 / 0                 |
        | storm, classes on    | 599 of 599    | 5ms       | 104ms     | 900ms     | 8364    | 6 / 8370     | 40 / 3                |
        | storm, classes off   | 553 of 553    | 300ms     | 1.14s     | 1.5s      | 7553    | 5 / 7558     | 60 / 0                |
    classes_test.go:77: traffic classes: write p99 with the storm, classes on, 15.5× alone's
--- PASS: TestTrafficClassesUnderAStorm (91.70s)
PASS
`
