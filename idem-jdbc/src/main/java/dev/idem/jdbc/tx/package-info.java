/**
 * Transactions as idem sees them: the open transaction handed to your callbacks ({@link
 * dev.idem.jdbc.tx.Tx}), how a framework's transaction is found ({@link
 * dev.idem.jdbc.tx.TransactionBinding}), and the one budget for running a refused transaction again
 * ({@link dev.idem.jdbc.tx.RetryBudget}).
 */
package dev.idem.jdbc.tx;
