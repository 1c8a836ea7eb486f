// Package enginecontract holds no code, only tests: the engine contract
// suite. It states every DynamoDB behaviour the store relies on and runs
// against whichever engine internal/enginetest selects (moto in CI,
// LocalStack or real DynamoDB on demand, see docs/local-engine.md).
//
// Where moto differs from DynamoDB's documented behaviour, the subtest is
// named moto_difference_* and asserts each engine's actual behaviour; the
// store must not depend on the difference.
package enginecontract
