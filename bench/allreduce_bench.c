/* Plain MPI_Allreduce of a float32 buffer: the baseline of bench/allreduce_bench.lua.
 *   mpirun -np 2 build/allreduce_bench [MB=64] [reps=10]
 * Prints the median seconds per allreduce and the algorithm bandwidth
 * (buffer bytes / time), rank 0 only. */
#include <mpi.h>
#include <stdio.h>
#include <stdlib.h>

static int cmp(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

int main(int argc, char **argv) {
  MPI_Init(&argc, &argv);
  int rank;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  double mb = argc > 1 ? atof(argv[1]) : 64;
  int reps = argc > 2 ? atoi(argv[2]) : 10;
  if (reps < 1 || reps > 1000) reps = 10;
  long n = (long)(mb * 1024 * 1024 / 4);
  float *buf = malloc(sizeof(float) * (size_t)n);
  double *t = malloc(sizeof(double) * (size_t)reps);
  if (!buf || !t) MPI_Abort(MPI_COMM_WORLD, 1);
  for (long i = 0; i < n; i++) buf[i] = (float)(i % 7);
  MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD); /* warm */
  for (int r = 0; r < reps; r++) {
    MPI_Barrier(MPI_COMM_WORLD);
    double t0 = MPI_Wtime();
    MPI_Allreduce(MPI_IN_PLACE, buf, (int)n, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    t[r] = MPI_Wtime() - t0;
  }
  qsort(t, (size_t)reps, sizeof *t, cmp);
  if (rank == 0)
    printf("mpi_allreduce %.0f MB: median %.4f s  %.2f GB/s\n", mb, t[reps / 2],
           mb / 1024 / t[reps / 2]);
  free(buf);
  free(t);
  MPI_Finalize();
  return 0;
}
